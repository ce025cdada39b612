//! The program a synthetic snapshot records: a GPT-style model trained with
//! AdamW under bf16 autocast, one step at a time.
//!
//! Each step copies a batch to the device (on a side stream, freed with
//! `record_stream` semantics, so its blocks wait for the stream before they
//! are reused), runs the forward pass (activations saved for backward,
//! temporaries freed at once, autocast weight copies), the backward pass on
//! the autograd thread (saved activations released layer by layer,
//! gradients in fp32), the optimizer (state created on the first step,
//! `_foreach` temporaries as large as the parameters) and
//! `zero_grad(set_to_none=True)`. The sequence length changes every step, so
//! activation sizes change and the cache fragments the way real dynamic-shape
//! training does.
//!
//! Owns the request stream only: which tensor of which size at which call
//! site. Addresses, segments and the trace come from the allocator model
//! (`synth::run`).

//!
//! The backward pass and the optimizer are in [`backward`].

mod backward;

use super::Rng;
use super::stacks::{Entry, PROJECT, Py, StackPool, TORCH, py};
use std::collections::HashMap;

/// A tensor of the program; the driver maps it to a block address.
pub type Tensor = u64;

#[derive(Debug, Clone, PartialEq)]
pub enum Req {
    Alloc {
        t: Tensor,
        size: u64,
        stream: i64,
        stack: u32,
    },
    /// The tensor dies. `deferred`: it was used on another stream, so the
    /// block only returns to the cache at a later allocation.
    Free {
        t: Tensor,
        stack: u32,
        deferred: bool,
    },
    /// A `record_function` range edge (`external_annotations`).
    Annotate {
        stage: &'static str,
        name: &'static str,
    },
    /// Time passes without allocations (kernels running), in microseconds.
    Gap(u64),
    /// `torch.cuda.empty_cache()`: pending frees are reaped and every whole
    /// cached segment (every free mapped page) is given back.
    EmptyCache { stack: u32 },
}

/// Asks for a new tensor of `size` bytes on `stream` at call site `stack`,
/// numbered after the program's last (`next`); its number.
pub fn new_tensor(
    out: &mut Vec<Req>,
    next: &mut Tensor,
    size: u64,
    stream: i64,
    stack: u32,
) -> Tensor {
    *next += 1;
    out.push(Req::Alloc {
        t: *next,
        size,
        stream,
        stack,
    });
    *next
}

/// A program whose allocations a synthetic snapshot records, one step (a
/// training step, a serving iteration) at a time.
pub trait Program {
    /// Appends the requests of the next step.
    fn next_step(&mut self, out: &mut Vec<Req>);
    /// Whether the allocator records the step just generated (recording is
    /// switched on after a warm-up).
    fn recording(&self) -> bool;
    /// The call stacks it interns. The generator hands every program of a
    /// run the same pool in turn, so frames are shared across devices.
    fn pool(&mut self) -> &mut StackPool;
    /// One line on what it runs, for the command's summary.
    fn describe(&self) -> String;
}

/// How a training run differs from the plain one (the default is `narrow`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Style {
    /// At least this many transformer blocks.
    pub min_layers: u64,
    /// Blocks sit inside containers nested as deep as their index (a
    /// model built recursively): each block's call sites have stacks of
    /// their own, from ~40 to ~300 frames.
    pub nested_blocks: bool,
    /// `torch.cuda.empty_cache()` at the end of every n-th step.
    pub empty_cache_every: Option<u64>,
    /// The side stream batches are copied on (`DATA_STREAM` by default).
    pub data_stream: Option<i64>,
    /// Seeds the steps (sequence lengths, timings) apart from the model's
    /// shape: a data-parallel replica of the same model on other data.
    pub step_seed: Option<u64>,
}

/// The side stream batches are copied on: a `cudaStream_t` pointer value, as
/// snapshots record streams.
pub const DATA_STREAM: i64 = 0x55d4_1f6a_b2c0;

#[derive(Debug, Clone, PartialEq)]
pub struct ModelShape {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub vocab: u64,
    pub batch: u64,
    pub seq_min: u64,
    pub seq_max: u64,
}

impl ModelShape {
    /// A model that fits a device of `capacity` bytes with room for
    /// fragmentation: parameters, gradients and Adam state take 16 bytes a
    /// parameter, activations about 40 bytes per token and hidden unit per
    /// layer.
    pub fn for_seed(rng: &mut Rng, capacity: u64, min_layers: u64) -> ModelShape {
        let hidden = [768u64, 1024, 1280, 1536, 2048][rng.below(5) as usize];
        let layers = (6 + rng.below(19)).max(min_layers);
        let vocab = [32_000u64, 50_257, 32_768][rng.below(3) as usize];
        let params = layers * 12 * hidden * hidden + vocab * hidden;
        let fixed = params * 16;
        let budget = (capacity / 2).saturating_sub(fixed).max(1 << 30);
        let per_token = layers * hidden * 40 + vocab * 14;
        let max_tokens = (budget / per_token).clamp(512, 32_768);
        let batch = [2u64, 4, 8][rng.below(3) as usize];
        let seq_max = (max_tokens / batch / 64 * 64).clamp(128, 4096);
        let seq_min = (seq_max / 4 / 64 * 64).max(64);
        ModelShape {
            layers,
            hidden,
            heads: hidden / 64,
            vocab,
            batch,
            seq_min,
            seq_max,
        }
    }
}

const ADDMM: &str = "at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&";
const MM: &str = "at::Tensor const&, at::Tensor const&";
const LN: &str = "at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double";
const UNARY: &str = "at::Tensor const&";
const BINARY: &str = "at::Tensor const&, at::Tensor const&, c10::Scalar const&";
const TO: &str = "at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>";
const SDPA: &str = "at::Tensor const&, at::Tensor const&, at::Tensor const&, double, bool, bool, std::optional<double>";
const FOREACH: &str = "c10::ArrayRef<at::Tensor>";

fn module_py() -> String {
    format!("{TORCH}/nn/modules/module.py")
}

/// `model(x)`'s frames from the training script out, innermost first.
fn call(inner: &[Py], caller: Py) -> Vec<Py> {
    let m = module_py();
    let mut v = inner.to_vec();
    v.push(py("_call_impl", &m, 1747));
    v.push(py("_wrapped_call_impl", &m, 1736));
    v.push(caller);
    v
}

/// Levels of container between the model and block `layer` under
/// [`Style::nested_blocks`] (at most 24, so the deepest stack has under
/// 300 frames).
fn nesting(layer: u64) -> u32 {
    (layer % 25) as u32
}

fn script(line: u32) -> Vec<Py> {
    let t = format!("{PROJECT}/train.py");
    vec![
        py("train_step", &t, line),
        py("main", &t, 142),
        py("<module>", &t, 171),
    ]
}

/// A call site inside the model: `parts` from the innermost torch frame out
/// to the model's own `forward`, then the block loop and the script. A block
/// at nesting `nest` is reached through that many `Stage` containers.
fn in_model(parts: &[&[Py]], in_block: bool, nest: u32) -> Entry {
    let model = format!("{PROJECT}/model.py");
    let mut v: Vec<Py> = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            v.extend_from_slice(p);
        } else {
            v = call(&v, p[0].clone());
            v.extend_from_slice(&p[1..]);
        }
    }
    if in_block {
        let stages = format!("{PROJECT}/stages.py");
        for level in 0..nest {
            let (name, line) = if level % 2 == 0 {
                ("forward", 230)
            } else {
                ("_run_children", 224)
            };
            v = call(&v, py(name, &stages, line));
        }
        v = call(&v, py("forward", &model, 191));
    }
    v = call(&v, script(61)[0].clone());
    v.extend_from_slice(&script(61)[1..]);
    Entry::Python(v)
}

struct BackSites {
    addmm: u32,
    sum: u32,
    acc: u32,
    r_addmm: u32,
}

struct LayerSaved {
    ln1: [Tensor; 3],
    qkv_w: Tensor,
    qkv: Tensor,
    attn: [Tensor; 2],
    proj_w: Tensor,
    resid1: Tensor,
    ln2: [Tensor; 3],
    fc1_w: Tensor,
    fc1: Tensor,
    gelu: Tensor,
    fc2_w: Tensor,
    resid2: Tensor,
}

pub struct Workload {
    pub shape: ModelShape,
    pub pool: StackPool,
    rng: Rng,
    style: Style,
    /// Container levels around the block being generated (0 outside blocks).
    nest: u32,
    sites: HashMap<(&'static str, u32), u32>,
    next: Tensor,
    /// (tensor, bytes) of every parameter, in creation order.
    params: Vec<(Tensor, u64)>,
    /// Adam's `exp_avg` and `exp_avg_sq`, made on the first step, never freed.
    adam: Vec<Tensor>,
    /// Batch tensors of the previous step, freed when the next batch arrives.
    batch: Vec<Tensor>,
    pub step: u64,
}

impl Workload {
    pub fn new(seed: u64, capacity: u64) -> Workload {
        Workload::with_style(seed, capacity, Style::default())
    }

    pub fn with_style(seed: u64, capacity: u64, style: Style) -> Workload {
        let mut rng = Rng::new(seed);
        let shape = ModelShape::for_seed(&mut rng, capacity, style.min_layers);
        if let Some(s) = style.step_seed {
            rng = Rng::new(s);
        }
        Workload {
            shape,
            pool: StackPool::new(),
            rng,
            style,
            nest: 0,
            sites: HashMap::new(),
            next: 0,
            params: Vec::new(),
            adam: Vec::new(),
            batch: Vec::new(),
            step: 0,
        }
    }

    /// The stack of call site `key` (inside the block being generated, if
    /// any), made by `make` the first time.
    fn site(&mut self, key: &'static str, make: impl FnOnce(&mut StackPool) -> u32) -> u32 {
        if let Some(&s) = self.sites.get(&(key, self.nest)) {
            return s;
        }
        let s = make(&mut self.pool);
        self.sites.insert((key, self.nest), s);
        s
    }

    fn alloc_on(&mut self, out: &mut Vec<Req>, size: u64, stream: i64, stack: u32) -> Tensor {
        new_tensor(out, &mut self.next, size, stream, stack)
    }

    fn alloc(&mut self, out: &mut Vec<Req>, size: u64, stack: u32) -> Tensor {
        self.alloc_on(out, size, 0, stack)
    }

    fn free(&mut self, out: &mut Vec<Req>, t: Tensor, stack: u32) {
        out.push(Req::Free {
            t,
            stack,
            deferred: false,
        });
    }

    fn gap(&mut self, out: &mut Vec<Req>, lo: u64, hi: u64) {
        let us = lo + self.rng.below(hi - lo + 1);
        out.push(Req::Gap(us));
    }

    /// The requests of the next training step (step 0 also builds the model).
    pub fn next_step(&mut self, out: &mut Vec<Req>) {
        if self.step == 0 {
            self.init(out);
        }
        let s = self.shape.clone();
        let seq = s.seq_min + self.rng.below((s.seq_max - s.seq_min) / 64 + 1) * 64;
        let tokens = s.batch * seq;
        self.data(out, tokens);
        let (saved, head) = self.forward(out, tokens, seq);
        self.gap(out, 2_000, 30_000);
        let grads = self.backward(out, tokens, seq, saved, head);
        self.gap(out, 1_000, 20_000);
        self.optimizer(out, grads);
        self.gap(out, 5_000, 50_000);
        self.step += 1;
        if let Some(n) = self.style.empty_cache_every
            && self.step.is_multiple_of(n)
        {
            let stack = self.site("empty_cache", |p| p.empty_cache(&script(67)));
            out.push(Req::EmptyCache { stack });
        }
    }

    fn init(&mut self, out: &mut Vec<Req>) {
        let m = module_py();
        let t = format!("{PROJECT}/train.py");
        let stack = self.site("param", |p| {
            p.alloc(
                "empty_strided",
                TO,
                &Entry::Python(vec![
                    py("convert", &m, 1340),
                    py("_apply", &m, 928),
                    py("_apply", &m, 901),
                    py("_apply", &m, 901),
                    py("to", &m, 1355),
                    py("main", &t, 118),
                    py("<module>", &t, 171),
                ]),
            )
        });
        let s = &self.shape;
        let (h, v) = (s.hidden, s.vocab);
        let mut sizes = vec![v * h * 4, 1024 * h * 4];
        for _ in 0..s.layers {
            sizes.extend_from_slice(&[
                h * 4,
                h * 4,
                3 * h * h * 4,
                3 * h * 4,
                h * h * 4,
                h * 4,
                h * 4,
                h * 4,
                4 * h * h * 4,
                4 * h * 4,
                4 * h * h * 4,
                h * 4,
            ]);
        }
        sizes.extend_from_slice(&[h * 4, h * 4]);
        for size in sizes {
            let tensor = self.alloc(out, size, stack);
            self.params.push((tensor, size));
        }
        self.gap(out, 100_000, 400_000);
    }

    fn data(&mut self, out: &mut Vec<Req>, tokens: u64) {
        let t = format!("{PROJECT}/train.py");
        let free = self.site("batch free", |p| p.free(&Entry::Python(script(58))));
        for old in std::mem::take(&mut self.batch) {
            out.push(Req::Free {
                t: old,
                stack: free,
                deferred: true,
            });
        }
        let stack = self.site("batch copy", |p| {
            p.alloc(
                "_to_copy",
                TO,
                &Entry::Python(vec![
                    py("<listcomp>", &t, 59),
                    py("train_step", &t, 59),
                    py("main", &t, 142),
                    py("<module>", &t, 171),
                ]),
            )
        });
        for _ in 0..2 {
            let stream = self.style.data_stream.unwrap_or(DATA_STREAM);
            let b = self.alloc_on(out, tokens * 8, stream, stack);
            self.batch.push(b);
        }
    }

    fn layer_norm(
        &mut self,
        out: &mut Vec<Req>,
        tokens: u64,
        line: u32,
        in_block: bool,
        key: [&'static str; 2],
    ) -> [Tensor; 3] {
        let model = format!("{PROJECT}/model.py");
        let f = format!("{TORCH}/nn/functional.py");
        let n = format!("{TORCH}/nn/modules/normalization.py");
        let nest = self.nest;
        let entry = || {
            in_model(
                &[
                    &[py("layer_norm", &f, 2910), py("forward", &n, 217)],
                    &[py("forward", &model, line)],
                ],
                in_block,
                nest,
            )
        };
        let h = self.shape.hidden;
        let o = self.site(key[0], |p| p.alloc("native_layer_norm", LN, &entry()));
        let a = self.alloc(out, tokens * h * 2, o);
        let m = self.site(key[1], |p| p.alloc("native_layer_norm", LN, &entry()));
        let b = self.alloc(out, tokens * 4, m);
        let c = self.alloc(out, tokens * 4, m);
        [a, b, c]
    }

    /// A `nn.Linear` under autocast, called from the model's `line` inside
    /// the block's `block_line`: the bf16 copy of the weight (kept for
    /// backward) and the output.
    #[allow(clippy::too_many_arguments)]
    fn linear(
        &mut self,
        out: &mut Vec<Req>,
        rows: u64,
        fan_in: u64,
        fan_out: u64,
        line: u32,
        block_line: u32,
        key: [&'static str; 2],
    ) -> (Tensor, Tensor) {
        let model = format!("{PROJECT}/model.py");
        let l = format!("{TORCH}/nn/modules/linear.py");
        let entry = in_model(
            &[
                &[py("forward", &l, 125)],
                &[py("forward", &model, line)],
                &[py("forward", &model, block_line)],
            ],
            true,
            self.nest,
        );
        let cast = self.site(key[0], |p| p.alloc("_to_copy", TO, &entry));
        let w = self.alloc(out, fan_in * fan_out * 2, cast);
        let mm = self.site(key[1], |p| p.alloc("addmm", ADDMM, &entry));
        let y = self.alloc(out, rows * fan_out * 2, mm);
        (w, y)
    }

    /// Allocation and free sites inside the model's `forward` at `line`,
    /// within the block's `block_line`.
    fn block_site(
        &mut self,
        key: &'static str,
        op: &'static str,
        sig: &'static str,
        line: u32,
        block_line: u32,
    ) -> u32 {
        let model = format!("{PROJECT}/model.py");
        let nest = self.nest;
        self.site(key, |p| {
            let e = in_model(
                &[
                    &[py("forward", &model, line)],
                    &[py("forward", &model, block_line)],
                ],
                true,
                nest,
            );
            if op.is_empty() {
                p.free(&e)
            } else {
                p.alloc(op, sig, &e)
            }
        })
    }

    /// The forward pass of one step over `tokens` (`seq` a sequence): the
    /// activations each layer saves for backward, and the head's tensors.
    ///
    /// About 130 lines long on purpose: the pass written as the model runs
    /// it, one request after another (their order is what the trace
    /// records), with each layer's pieces already in
    /// [`Workload::layer_norm`], [`Workload::linear`] and
    /// [`Workload::block_site`].
    fn forward(
        &mut self,
        out: &mut Vec<Req>,
        tokens: u64,
        seq: u64,
    ) -> (Vec<LayerSaved>, Vec<Tensor>) {
        let model = format!("{PROJECT}/model.py");
        let sparse = format!("{TORCH}/nn/modules/sparse.py");
        let f = format!("{TORCH}/nn/functional.py");
        let linear = format!("{TORCH}/nn/modules/linear.py");
        let s = self.shape.clone();
        let h = s.hidden;
        let emb_site = self.site("embedding", |p| {
            p.alloc(
                "embedding",
                MM,
                &in_model(
                    &[
                        &[py("embedding", &f, 2551), py("forward", &sparse, 190)],
                        &[py("forward", &model, 188)],
                    ],
                    false,
                    0,
                ),
            )
        });
        let emb = self.alloc(out, tokens * h * 2, emb_site);
        let pos_site = self.site("pos add", |p| {
            p.alloc(
                "add",
                BINARY,
                &in_model(&[&[py("forward", &model, 189)]], false, 0),
            )
        });
        let x = self.alloc(out, tokens * h * 2, pos_site);
        let mut layers = Vec::new();
        for layer in 0..s.layers {
            if self.style.nested_blocks {
                self.nest = nesting(layer);
            }
            let resid_free = self.block_site("resid free", "", "", 97, 191);
            let split_site = self.block_site("qkv split", "clone", UNARY, 53, 97);
            let sdpa_site =
                self.block_site("sdpa", "_scaled_dot_product_flash_attention", SDPA, 55, 97);
            let split_free = self.block_site("qkv split free", "", "", 55, 97);
            let add_site = self.block_site("resid add", "add", BINARY, 97, 191);
            let gelu_site = self.block_site("gelu", "gelu", UNARY, 75, 99);
            let add2_site = self.block_site("resid add 2", "add", BINARY, 99, 191);
            let ln1 = self.layer_norm(out, tokens, 96, true, ["ln1 out", "ln1 stats"]);
            let (qkv_w, qkv) = self.linear(out, tokens, h, 3 * h, 52, 97, ["qkv cast", "qkv"]);
            // q, k and v made contiguous for the kernel, dropped after it.
            let parts: Vec<Tensor> = (0..3)
                .map(|_| self.alloc(out, tokens * h * 2, split_site))
                .collect();
            let o = self.alloc(out, tokens * h * 2, sdpa_site);
            let lse = self.alloc(out, s.batch * s.heads * seq * 4, sdpa_site);
            for t in parts {
                self.free(out, t, split_free);
            }
            let (proj_w, proj) = self.linear(out, tokens, h, h, 57, 97, ["proj cast", "proj"]);
            let resid1 = self.alloc(out, tokens * h * 2, add_site);
            self.free(out, proj, resid_free);
            let ln2 = self.layer_norm(out, tokens, 98, true, ["ln2 out", "ln2 stats"]);
            let (fc1_w, fc1) = self.linear(out, tokens, h, 4 * h, 74, 99, ["fc1 cast", "fc1"]);
            let gelu = self.alloc(out, tokens * 4 * h * 2, gelu_site);
            let (fc2_w, fc2) = self.linear(out, tokens, 4 * h, h, 76, 99, ["fc2 cast", "fc2"]);
            let resid2 = self.alloc(out, tokens * h * 2, add2_site);
            self.free(out, fc2, resid_free);
            layers.push(LayerSaved {
                ln1,
                qkv_w,
                qkv,
                attn: [o, lse],
                proj_w,
                resid1,
                ln2,
                fc1_w,
                fc1,
                gelu,
                fc2_w,
                resid2,
            });
            if layer % 4 == 3 {
                self.gap(out, 200, 3_000);
            }
        }
        self.nest = 0;
        let lnf = self.layer_norm(out, tokens, 193, false, ["lnf out", "lnf stats"]);
        let head_site = self.site("lm head", |p| {
            p.alloc(
                "mm",
                MM,
                &in_model(
                    &[
                        &[py("forward", &linear, 125)],
                        &[py("forward", &model, 194)],
                    ],
                    false,
                    0,
                ),
            )
        });
        let logits = self.alloc(out, tokens * s.vocab * 2, head_site);
        let loss_entry = || {
            in_model(
                &[
                    &[py("cross_entropy", &f, 3494)],
                    &[py("forward", &model, 196)],
                ],
                false,
                0,
            )
        };
        let up_site = self.site("logits upcast", |p| p.alloc("_to_copy", TO, &loss_entry()));
        let up = self.alloc(out, tokens * s.vocab * 4, up_site);
        let lsm_site = self.site("log_softmax", |p| {
            p.alloc("_log_softmax", UNARY, &loss_entry())
        });
        let lsm = self.alloc(out, tokens * s.vocab * 4, lsm_site);
        let up_free = self.site("upcast free", |p| p.free(&loss_entry()));
        self.free(out, up, up_free);
        let loss_site = self.site("nll", |p| p.alloc("nll_loss_forward", UNARY, &loss_entry()));
        let loss = self.alloc(out, 4, loss_site);
        let weight = self.alloc(out, 4, loss_site);
        let mut head = vec![emb, x];
        head.extend_from_slice(&lnf);
        head.extend_from_slice(&[logits, lsm, loss, weight]);
        (layers, head)
    }
}

impl Program for Workload {
    fn next_step(&mut self, out: &mut Vec<Req>) {
        Workload::next_step(self, out)
    }
    /// Recording starts after the warm-up step.
    fn recording(&self) -> bool {
        self.step > 1
    }
    fn pool(&mut self) -> &mut StackPool {
        &mut self.pool
    }
    fn describe(&self) -> String {
        let m = &self.shape;
        format!(
            "model: {} layers x {} hidden, batch {} x {}..{} tokens",
            m.layers, m.hidden, m.batch, m.seq_min, m.seq_max
        )
    }
}
