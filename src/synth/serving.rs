//! The program of the `fragmented` shape: a language model served with
//! continuous batching and a key/value cache per request and layer that
//! grows by concatenation (`torch.cat` into a tensor a chunk longer, then
//! the old one freed), as Hugging Face's dynamic cache does.
//!
//! Requests of random prompt and output lengths join and leave the batch
//! every iteration, so thousands of cache tensors of as many sizes are live
//! at once, scattered over the segments, among the per-iteration
//! temporaries whose sizes follow the batch's; every 4 to 12 iterations
//! the server calls `torch.cuda.empty_cache()`, so the segments left empty
//! are given back and their addresses reused, while the ones a few cache
//! tensors pin stay. The server has been running when recording
//! starts: the first requests are already part-way through their output.
//!
//! Owns the request stream only, as [`super::workload`] does.

use super::Rng;
use super::stacks::{Entry, Py, StackPool, TORCH, py};
use super::workload::{Program, Req, Tensor, new_tensor};

const HF: &str = "/usr/local/lib/python3.10/dist-packages/transformers";
const SERVER: &str = "/srv/llm-serve/server.py";
const MM: &str = "at::Tensor const&, at::Tensor const&";
const CAT: &str = "c10::ArrayRef<at::Tensor> const&, long";
const UNARY: &str = "at::Tensor const&";
const BINARY: &str = "at::Tensor const&, at::Tensor const&, c10::Scalar const&";
const SDPA: &str = "at::Tensor const&, at::Tensor const&, at::Tensor const&, double, bool, bool, std::optional<double>";
const TO: &str = "at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>";

#[derive(Debug, Clone, PartialEq)]
pub struct ServeShape {
    pub layers: u64,
    pub hidden: u64,
    pub intermediate: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab: u64,
    /// Most requests in the batch at once.
    pub max_batch: u64,
    /// Tokens a cache grows by when it is full.
    pub chunk: u64,
    pub prompt_max: u64,
    pub output_max: u64,
    pub empty_cache_every: u64,
}

impl ServeShape {
    pub fn for_seed(rng: &mut Rng, capacity: u64) -> ServeShape {
        let layers = [32u64, 40, 48][rng.below(3) as usize];
        let hidden = [2048u64, 3072, 4096][rng.below(3) as usize];
        // 512 bytes of key (and of value) a token and layer: caches up to
        // 1 MiB sit in the small pool's 2 MiB segments, a few in the large.
        let (kv_heads, head_dim) = [(2u64, 128u64), (4, 64)][rng.below(2) as usize];
        let vocab = [32_000u64, 128_256, 151_936][rng.below(3) as usize];
        let chunk = [16u64, 32, 64][rng.below(3) as usize];
        let intermediate = hidden * 8 / 3 / 256 * 256;
        let (prompt_max, output_max) = (1536, 768);
        let weights = layers * (2 * hidden * hidden + 2 * hidden * kv_heads * head_dim) * 2
            + layers * 3 * hidden * intermediate * 2
            + 2 * vocab * hidden * 2;
        // A request holds half its longest cache on average.
        let per_request = layers * 2 * (prompt_max + output_max + chunk) * kv_heads * head_dim;
        let budget = (capacity as f64 * 0.45) as u64;
        let max_batch = (budget.saturating_sub(weights) / per_request.max(1)).clamp(16, 128);
        ServeShape {
            layers,
            hidden,
            intermediate,
            kv_heads,
            head_dim,
            vocab,
            max_batch,
            chunk,
            prompt_max,
            output_max,
            empty_cache_every: 4 + rng.below(9),
        }
    }

    fn kv_bytes(&self, tokens: u64) -> u64 {
        tokens * self.kv_heads * self.head_dim * 2
    }
}

struct Request {
    /// (key, value) cache of each layer.
    kv: Vec<[Tensor; 2]>,
    len: u64,
    cap: u64,
    left: u64,
}

#[derive(Clone, Copy)]
struct Sites {
    weight: u32,
    embed: u32,
    cat: u32,
    cat_free: u32,
    q: u32,
    sdpa: u32,
    o: u32,
    add: u32,
    gate: u32,
    act: u32,
    down: u32,
    layer_free: u32,
    head: u32,
    upcast: u32,
    sample: u32,
    head_free: u32,
    evict: u32,
    empty_cache: u32,
}

pub struct Serving {
    pub shape: ServeShape,
    pub pool: StackPool,
    rng: Rng,
    sites: Option<Sites>,
    active: Vec<Request>,
    next: Tensor,
    step: u64,
    /// Iterations before recording starts.
    warm: u64,
}

impl Serving {
    pub fn new(seed: u64, capacity: u64) -> Serving {
        let mut rng = Rng::new(seed ^ 0x5345_5256_4500);
        let shape = ServeShape::for_seed(&mut rng, capacity);
        Serving {
            shape,
            pool: StackPool::new(),
            rng,
            sites: None,
            active: Vec::new(),
            next: 0,
            step: 0,
            warm: 96,
        }
    }

    /// The serving loop's call sites, made once: each site's frames, from
    /// the tensor's op out to the server's `main`.
    ///
    /// Long (about 170 lines) because it is a table: one entry a site, each
    /// written where its frames are, with the few helpers the entries share
    /// (`call`, `outer`, `at`) above them.
    fn sites(&mut self) -> Sites {
        if let Some(s) = self.sites {
            return s;
        }
        let llama = format!("{HF}/models/llama/modeling_llama.py");
        let cache = format!("{HF}/cache_utils.py");
        let generation = format!("{HF}/generation/utils.py");
        let module = format!("{TORCH}/nn/modules/module.py");
        let linear = format!("{TORCH}/nn/modules/linear.py");
        let call = |v: &mut Vec<Py>, caller: Py| {
            v.push(py("_call_impl", &module, 1747));
            v.push(py("_wrapped_call_impl", &module, 1736));
            v.push(caller);
        };
        // The server's frames from its `step` (at `line`) outwards, after
        // `inner`.
        let in_step = |inner: Vec<Py>, line: u32| {
            let mut v = inner;
            v.push(py("step", SERVER, line));
            v.push(py("serve_forever", SERVER, 301));
            v.push(py("main", SERVER, 344));
            v.push(py("<module>", SERVER, 351));
            v
        };
        // The iteration's model call, from LlamaForCausalLM out to the server.
        let outer = |v: &mut Vec<Py>| {
            call(v, py("_sample", &generation, 3254));
            *v = in_step(std::mem::take(v), 212);
        };
        // A call site in LlamaModel.forward (`in_layer`: in a decoder layer's
        // `part` (attention or MLP), itself at `layer_line`).
        let at = |inner: Vec<Py>, part: Option<(Py, u32)>| {
            let mut v = inner;
            if let Some((p, layer_line)) = part {
                call(&mut v, p);
                call(&mut v, py("forward", &llama, layer_line));
                call(&mut v, py("forward", &llama, 571));
            }
            call(&mut v, py("forward", &llama, 877));
            outer(&mut v);
            Entry::Python(v)
        };
        let attn = |line: u32| (py("forward", &llama, line), 334);
        let mlp = |line: u32| (py("forward", &llama, line), 342);
        let lin = || vec![py("forward", &linear, 125)];
        let p = &mut self.pool;
        let weight = p.alloc(
            "empty_strided",
            TO,
            &Entry::Python(vec![
                py(
                    "_load_state_dict_into_meta_model",
                    &format!("{HF}/modeling_utils.py"),
                    867,
                ),
                py(
                    "_load_pretrained_model",
                    &format!("{HF}/modeling_utils.py"),
                    4944,
                ),
                py("from_pretrained", &format!("{HF}/modeling_utils.py"), 4225),
                py("load_model", SERVER, 58),
                py("main", SERVER, 330),
                py("<module>", SERVER, 351),
            ]),
        );
        let embed = p.alloc(
            "embedding",
            MM,
            &at(
                vec![
                    py("embedding", &format!("{TORCH}/nn/functional.py"), 2551),
                    py("forward", &format!("{TORCH}/nn/modules/sparse.py"), 190),
                ],
                None,
            ),
        );
        let update = vec![py("update", &cache, 361)];
        let cat = p.alloc("cat", CAT, &at(update.clone(), Some(attn(271))));
        let cat_free = p.free(&at(update, Some(attn(271))));
        let q = p.alloc("mm", MM, &at(lin(), Some(attn(251))));
        let sdpa = p.alloc(
            "_scaled_dot_product_flash_attention",
            SDPA,
            &at(
                vec![py(
                    "sdpa_attention_forward",
                    &format!("{HF}/integrations/sdpa_attention.py"),
                    96,
                )],
                Some(attn(281)),
            ),
        );
        let o = p.alloc("mm", MM, &at(lin(), Some(attn(293))));
        let add = p.alloc(
            "add",
            BINARY,
            &at(vec![], Some((py("forward", &llama, 336), 571))),
        );
        let gate = p.alloc("mm", MM, &at(lin(), Some(mlp(166))));
        let act = p.alloc("mul", BINARY, &at(vec![], Some(mlp(166))));
        let down = p.alloc("mm", MM, &at(lin(), Some(mlp(167))));
        let layer_free = p.free(&at(vec![], Some(mlp(167))));
        let head_at = |inner: Vec<Py>| {
            let mut v = inner;
            outer(&mut v);
            Entry::Python(v)
        };
        let head = p.alloc(
            "mm",
            MM,
            &head_at(vec![
                py("forward", &linear, 125),
                py("forward", &llama, 1012),
            ]),
        );
        let upcast = p.alloc("_to_copy", TO, &head_at(vec![py("forward", &llama, 1014)]));
        let sample = p.alloc(
            "argmax",
            UNARY,
            &Entry::Python(in_step(vec![py("_sample", &generation, 3290)], 212)),
        );
        let head_free = p.free(&Entry::Python(in_step(
            vec![py("_sample", &generation, 3301)],
            212,
        )));
        let evict = p.free(&Entry::Python(in_step(vec![py("evict", SERVER, 187)], 226)));
        let empty_cache = p.empty_cache(&[
            py("serve_forever", SERVER, 309),
            py("main", SERVER, 344),
            py("<module>", SERVER, 351),
        ]);
        let s = Sites {
            weight,
            embed,
            cat,
            cat_free,
            q,
            sdpa,
            o,
            add,
            gate,
            act,
            down,
            layer_free,
            head,
            upcast,
            sample,
            head_free,
            evict,
            empty_cache,
        };
        self.sites = Some(s);
        s
    }

    fn alloc(&mut self, out: &mut Vec<Req>, size: u64, stack: u32) -> Tensor {
        new_tensor(out, &mut self.next, size, 0, stack)
    }

    fn free(out: &mut Vec<Req>, t: Tensor, stack: u32) {
        out.push(Req::Free {
            t,
            stack,
            deferred: false,
        });
    }

    fn load_weights(&mut self, out: &mut Vec<Req>, s: &Sites) {
        let m = self.shape.clone();
        let (h, kv) = (m.hidden, m.kv_heads * m.head_dim);
        let mut sizes = vec![m.vocab * h * 2];
        for _ in 0..m.layers {
            sizes.extend_from_slice(&[
                h * h * 2,
                h * kv * 2,
                h * kv * 2,
                h * h * 2,
                h * m.intermediate * 2,
                h * m.intermediate * 2,
                h * m.intermediate * 2,
                h * 2,
                h * 2,
            ]);
        }
        sizes.extend_from_slice(&[h * 2, m.vocab * h * 2]);
        for size in sizes {
            self.alloc(out, size, s.weight);
        }
    }

    /// A new request's prefill: its caches, made `chunk` tokens longer
    /// than the prompt, and the prompt's temporaries.
    fn admit(&mut self, out: &mut Vec<Req>, s: &Sites, done: u64) {
        let m = self.shape.clone();
        let prompt = 16 + self.rng.below(m.prompt_max - 15);
        let output = 16 + self.rng.below(m.output_max - 15);
        let len = prompt + done.min(output - 1);
        let cap = len + 1 + self.rng.below(m.chunk);
        let x = self.alloc(out, prompt * m.hidden * 2, s.embed);
        let mut kv = Vec::with_capacity(m.layers as usize);
        for _ in 0..m.layers {
            let k = self.alloc(out, m.kv_bytes(cap), s.cat);
            let v = self.alloc(out, m.kv_bytes(cap), s.cat);
            kv.push([k, v]);
            let a = self.alloc(out, prompt * m.hidden * 2, s.sdpa);
            let g = self.alloc(out, prompt * m.intermediate * 2, s.gate);
            Self::free(out, a, s.layer_free);
            Self::free(out, g, s.layer_free);
        }
        Self::free(out, x, s.layer_free);
        let logits = self.alloc(out, m.vocab * 4, s.upcast);
        Self::free(out, logits, s.head_free);
        self.active.push(Request {
            kv,
            len,
            cap,
            left: output - done.min(output - 1),
        });
    }

    /// One decode iteration of the whole batch.
    fn decode(&mut self, out: &mut Vec<Req>, s: &Sites) {
        let m = self.shape.clone();
        let b = self.active.len() as u64;
        let (h, inter) = (m.hidden, m.intermediate);
        let mut x = self.alloc(out, b * h * 2, s.embed);
        for layer in 0..m.layers as usize {
            let q = self.alloc(out, b * h * 2, s.q);
            // Each full cache is concatenated into one a chunk longer.
            for r in 0..self.active.len() {
                let req = &self.active[r];
                if req.len < req.cap {
                    continue;
                }
                let size = m.kv_bytes(req.cap + m.chunk);
                let [ok, ov] = req.kv[layer];
                let k = self.alloc(out, size, s.cat);
                Self::free(out, ok, s.cat_free);
                let v = self.alloc(out, size, s.cat);
                Self::free(out, ov, s.cat_free);
                self.active[r].kv[layer] = [k, v];
            }
            let a = self.alloc(out, b * h * 2, s.sdpa);
            Self::free(out, q, s.layer_free);
            let o = self.alloc(out, b * h * 2, s.o);
            Self::free(out, a, s.layer_free);
            let x2 = self.alloc(out, b * h * 2, s.add);
            Self::free(out, o, s.layer_free);
            Self::free(out, x, s.layer_free);
            let g = self.alloc(out, b * inter * 2, s.gate);
            let u = self.alloc(out, b * inter * 2, s.gate);
            let act = self.alloc(out, b * inter * 2, s.act);
            Self::free(out, g, s.layer_free);
            Self::free(out, u, s.layer_free);
            let d = self.alloc(out, b * h * 2, s.down);
            Self::free(out, act, s.layer_free);
            x = self.alloc(out, b * h * 2, s.add);
            Self::free(out, d, s.layer_free);
            Self::free(out, x2, s.layer_free);
        }
        for r in &mut self.active {
            if r.len >= r.cap {
                r.cap += m.chunk;
            }
            r.len += 1;
            r.left -= 1;
        }
        let logits = self.alloc(out, b * m.vocab * 2, s.head);
        let f = self.alloc(out, b * m.vocab * 4, s.upcast);
        Self::free(out, logits, s.head_free);
        let t = self.alloc(out, b * 8, s.sample);
        Self::free(out, f, s.head_free);
        Self::free(out, x, s.head_free);
        Self::free(out, t, s.head_free);
        // Finished requests leave the batch, their caches with them.
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].left == 0 {
                let r = self.active.remove(i);
                for [k, v] in r.kv {
                    Self::free(out, k, s.evict);
                    Self::free(out, v, s.evict);
                }
            } else {
                i += 1;
            }
        }
    }
}

impl Program for Serving {
    fn next_step(&mut self, out: &mut Vec<Req>) {
        let s = self.sites();
        let m = self.shape.clone();
        if self.step == 0 {
            self.load_weights(out, &s);
            // Already serving: each request part-way through its output.
            for _ in 0..m.max_batch {
                let done = self.rng.below(m.output_max);
                self.admit(out, &s, done);
            }
        }
        self.decode(out, &s);
        for _ in 0..2 {
            if (self.active.len() as u64) < m.max_batch && self.rng.below(3) > 0 {
                self.admit(out, &s, 0);
            }
        }
        out.push(Req::Gap(15_000 + self.rng.below(25_000)));
        self.step += 1;
        if self.step.is_multiple_of(m.empty_cache_every) {
            out.push(Req::EmptyCache {
                stack: s.empty_cache,
            });
        }
    }
    fn recording(&self) -> bool {
        self.step > self.warm
    }
    fn pool(&mut self) -> &mut StackPool {
        &mut self.pool
    }
    fn describe(&self) -> String {
        let m = &self.shape;
        format!(
            "serving: {} layers x {} hidden, {} KV heads, up to {} requests at once, caches grown by {} tokens",
            m.layers, m.hidden, m.kv_heads, m.max_batch, m.chunk
        )
    }
}
