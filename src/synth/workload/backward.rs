//! The training step's second half: the backward pass on the autograd
//! thread (saved activations released layer by layer, gradients in fp32)
//! and the AdamW optimizer with `zero_grad(set_to_none=True)`.

use super::*;

/// What every decoder layer's backward uses: the linear layers' sites, the
/// step's size and the sites of the other autograd nodes.
struct LayerPass {
    back: BackSites,
    tokens: u64,
    seq: u64,
    lnb: u32,
    rln: u32,
    geb: u32,
    rgelu: u32,
    fab: u32,
    rfa: u32,
    catb: u32,
    addb: u32,
    radd: u32,
}

impl Workload {
    pub(super) fn autograd_alloc(
        &mut self,
        node: &'static str,
        op: &'static str,
        sig: &'static str,
    ) -> u32 {
        self.site(node, |p| p.alloc(op, sig, &Entry::Autograd(node)))
    }

    pub(super) fn autograd_release(&mut self, key: &'static str, node: &'static str) -> u32 {
        self.site(key, |p| p.free(&Entry::Autograd(node)))
    }

    /// `AddmmBackward0` of a linear layer whose weight is parameter `wi`
    /// (its bias `wi + 1`): the input gradient, the weight gradient in bf16
    /// and then fp32, the bias gradient. The incoming gradient `g` stays.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn linear_backward(
        &mut self,
        out: &mut Vec<Req>,
        b: &BackSites,
        rows: u64,
        fan_in: u64,
        fan_out: u64,
        wi: usize,
        grads: &mut [Option<Tensor>],
    ) -> Tensor {
        let gi = self.alloc(out, rows * fan_in * 2, b.addmm);
        let wg = self.alloc(out, fan_in * fan_out * 2, b.addmm);
        let acc = self.alloc(out, fan_in * fan_out * 4, b.acc);
        let bg = self.alloc(out, fan_out * 4, b.sum);
        grads[wi] = Some(acc);
        grads[wi + 1] = Some(bg);
        self.free(out, wg, b.r_addmm);
        gi
    }

    /// Backward on the autograd thread: returns the gradients (one per
    /// parameter, in parameter order). The head and the embeddings here,
    /// each decoder layer in [`Workload::layer_backward`].
    pub(super) fn backward(
        &mut self,
        out: &mut Vec<Req>,
        tokens: u64,
        seq: u64,
        layers: Vec<LayerSaved>,
        head: Vec<Tensor>,
    ) -> Vec<Tensor> {
        let s = self.shape.clone();
        let h = s.hidden;
        let nparams = self.params.len();
        let mut grads: Vec<Option<Tensor>> = vec![None; nparams];
        let b = BackSites {
            addmm: self.autograd_alloc("AddmmBackward0", "mm", MM),
            sum: self.site("AddmmBackward0 sum", |p| {
                p.alloc("sum", UNARY, &Entry::Autograd("AddmmBackward0"))
            }),
            acc: self.autograd_alloc("AccumulateGrad", "_to_copy", TO),
            r_addmm: self.autograd_release("release AddmmBackward0", "AddmmBackward0"),
        };
        // Head: cross entropy, log_softmax and the lm head (tied to the
        // token embedding, parameter 0).
        let nll = self.autograd_alloc("NllLossBackward0", "nll_loss_backward", UNARY);
        let g1 = self.alloc(out, tokens * s.vocab * 4, nll);
        let lsmb = self.autograd_alloc("LogSoftmaxBackward0", "_log_softmax_backward_data", UNARY);
        let g2 = self.alloc(out, tokens * s.vocab * 4, lsmb);
        let r = self.autograd_release("release NllLossBackward0", "NllLossBackward0");
        self.free(out, g1, r);
        let r = self.autograd_release("release LogSoftmaxBackward0", "LogSoftmaxBackward0");
        for &t in &head[6..9] {
            self.free(out, t, r);
        }
        let tcb = self.autograd_alloc("ToCopyBackward0", "_to_copy", TO);
        let g3 = self.alloc(out, tokens * s.vocab * 2, tcb);
        self.free(out, g2, r);
        let mmb = self.autograd_alloc("MmBackward0", "mm", MM);
        let g_head = self.alloc(out, tokens * h * 2, mmb);
        let wg = self.alloc(out, s.vocab * h * 2, mmb);
        grads[0] = Some(self.alloc(out, s.vocab * h * 4, b.acc));
        let r = self.autograd_release("release MmBackward0", "MmBackward0");
        self.free(out, wg, r);
        self.free(out, g3, r);
        self.free(out, head[5], r);
        // Final layer norm.
        let lnb = self.autograd_alloc("NativeLayerNormBackward0", "native_layer_norm_backward", LN);
        let rln = self.autograd_release(
            "release NativeLayerNormBackward0",
            "NativeLayerNormBackward0",
        );
        let mut g = self.alloc(out, tokens * h * 2, lnb);
        grads[nparams - 2] = Some(self.alloc(out, h * 4, lnb));
        grads[nparams - 1] = Some(self.alloc(out, h * 4, lnb));
        self.free(out, g_head, rln);
        for &t in &head[2..5] {
            self.free(out, t, rln);
        }
        let pass = LayerPass {
            back: b,
            tokens,
            seq,
            lnb,
            rln,
            geb: self.autograd_alloc("GeluBackward0", "gelu_backward", MM),
            rgelu: self.autograd_release("release GeluBackward0", "GeluBackward0"),
            fab: self.autograd_alloc(
                "ScaledDotProductFlashAttentionBackward0",
                "_scaled_dot_product_flash_attention_backward",
                SDPA,
            ),
            rfa: self.autograd_release(
                "release ScaledDotProductFlashAttentionBackward0",
                "ScaledDotProductFlashAttentionBackward0",
            ),
            catb: self.site("cat", |p| {
                p.alloc("cat", FOREACH, &Entry::Autograd("SplitBackward0"))
            }),
            addb: self.autograd_alloc("AddBackward0", "add", BINARY),
            radd: self.autograd_release("release AddBackward0", "AddBackward0"),
        };
        for (li, l) in layers.into_iter().enumerate().rev() {
            g = self.layer_backward(out, &pass, li, l, g, &mut grads);
            if li % 4 == 0 {
                self.gap(out, 200, 3_000);
            }
        }
        // Positional and token embeddings.
        let embb = self.autograd_alloc("EmbeddingBackward0", "embedding_dense_backward", MM);
        let remb = self.autograd_release("release EmbeddingBackward0", "EmbeddingBackward0");
        grads[1] = Some(self.alloc(out, 1024 * h * 4, embb));
        let eg = self.alloc(out, s.vocab * h * 4, embb);
        self.free(out, eg, remb);
        self.free(out, g, remb);
        self.free(out, head[1], remb);
        self.free(out, head[0], remb);
        grads
            .into_iter()
            .map(|g| g.expect("every parameter gets a gradient"))
            .collect()
    }

    /// The backward of decoder layer `li`, whose saved activations are `l`,
    /// from the incoming gradient `g` (released here) to the gradient it
    /// hands to the layer below; its parameters' gradients go to `grads`.
    fn layer_backward(
        &mut self,
        out: &mut Vec<Req>,
        p: &LayerPass,
        li: usize,
        l: LayerSaved,
        g: Tensor,
        grads: &mut [Option<Tensor>],
    ) -> Tensor {
        let h = self.shape.hidden;
        let base = 2 + li * 12;
        // MLP branch: fc2, gelu, fc1, the second layer norm.
        let g_fc2 = self.linear_backward(out, &p.back, p.tokens, 4 * h, h, base + 10, grads);
        self.free(out, l.fc2_w, p.back.r_addmm);
        self.free(out, l.resid2, p.radd);
        let g_gelu = self.alloc(out, p.tokens * 4 * h * 2, p.geb);
        self.free(out, g_fc2, p.rgelu);
        self.free(out, l.gelu, p.rgelu);
        let g_fc1 = self.linear_backward(out, &p.back, p.tokens, h, 4 * h, base + 8, grads);
        self.free(out, g_gelu, p.back.r_addmm);
        self.free(out, l.fc1_w, p.back.r_addmm);
        self.free(out, l.fc1, p.back.r_addmm);
        let g_ln2 = self.alloc(out, p.tokens * h * 2, p.lnb);
        grads[base + 6] = Some(self.alloc(out, h * 4, p.lnb));
        grads[base + 7] = Some(self.alloc(out, h * 4, p.lnb));
        self.free(out, g_fc1, p.rln);
        for t in l.ln2 {
            self.free(out, t, p.rln);
        }
        // The residual sums the branch's gradient into the layer's.
        let g_res = self.alloc(out, p.tokens * h * 2, p.addb);
        self.free(out, g_ln2, p.radd);
        self.free(out, g, p.radd);
        self.free(out, l.resid1, p.radd);
        // Attention branch: projection, attention, qkv, the first layer norm.
        let g_proj = self.linear_backward(out, &p.back, p.tokens, h, h, base + 4, grads);
        let dqkv: Vec<Tensor> = (0..3)
            .map(|_| self.alloc(out, p.tokens * h * 2, p.fab))
            .collect();
        let scratch = self.alloc(out, self.shape.batch * self.shape.heads * p.seq * 4, p.fab);
        self.free(out, scratch, p.rfa);
        self.free(out, g_proj, p.rfa);
        self.free(out, l.proj_w, p.back.r_addmm);
        for t in l.attn {
            self.free(out, t, p.rfa);
        }
        let g_qkv = self.alloc(out, p.tokens * 3 * h * 2, p.catb);
        for t in dqkv {
            self.free(out, t, p.rfa);
        }
        let g_in = self.linear_backward(out, &p.back, p.tokens, h, 3 * h, base + 2, grads);
        self.free(out, g_qkv, p.back.r_addmm);
        self.free(out, l.qkv_w, p.back.r_addmm);
        self.free(out, l.qkv, p.back.r_addmm);
        let g_ln1 = self.alloc(out, p.tokens * h * 2, p.lnb);
        grads[base] = Some(self.alloc(out, h * 4, p.lnb));
        grads[base + 1] = Some(self.alloc(out, h * 4, p.lnb));
        self.free(out, g_in, p.rln);
        for t in l.ln1 {
            self.free(out, t, p.rln);
        }
        let g_out = self.alloc(out, p.tokens * h * 2, p.addb);
        self.free(out, g_ln1, p.radd);
        self.free(out, g_res, p.radd);
        g_out
    }

    pub(super) fn optimizer(&mut self, out: &mut Vec<Req>, grads: Vec<Tensor>) {
        let opt = format!("{TORCH}/optim/optimizer.py");
        let adamw = format!("{TORCH}/optim/adamw.py");
        let inside = |line: u32| {
            let mut v = vec![
                py("_multi_tensor_adamw", &adamw, line),
                py("adamw", &adamw, 766),
                py("step", &adamw, 220),
                py("_use_grad", &opt, 79),
                py("wrapper", &opt, 487),
            ];
            v.extend(script(64));
            Entry::Python(v)
        };
        out.push(Req::Annotate {
            stage: "START",
            name: "Optimizer.step#AdamW.step",
        });
        if self.adam.is_empty() {
            let zl = self.site("adam state", |p| p.alloc("zeros_like", UNARY, &inside(512)));
            let sizes: Vec<u64> = self.params.iter().map(|p| p.1).collect();
            for size in sizes {
                for _ in 0..2 {
                    let t = self.alloc(out, size, zl);
                    self.adam.push(t);
                }
            }
        }
        let sqrt = self.site("foreach sqrt", |p| {
            p.alloc("_foreach_sqrt", FOREACH, &inside(540))
        });
        let fdiv = self.site("foreach div", |p| {
            p.alloc("_foreach_div", FOREACH, &inside(548))
        });
        let free = self.site("foreach free", |p| p.free(&inside(552)));
        let sizes: Vec<u64> = self.params.iter().map(|p| p.1).collect();
        // Parameters go through `_foreach` ops in groups, as the optimizer
        // splits them by device and dtype.
        for chunk in sizes.chunks(24) {
            let a: Vec<Tensor> = chunk.iter().map(|&s| self.alloc(out, s, sqrt)).collect();
            let b: Vec<Tensor> = chunk.iter().map(|&s| self.alloc(out, s, fdiv)).collect();
            for t in a.into_iter().chain(b) {
                self.free(out, t, free);
            }
        }
        out.push(Req::Annotate {
            stage: "END",
            name: "Optimizer.step#AdamW.step",
        });
        let zg = self.site("zero_grad", |p| {
            let mut v = vec![py("zero_grad", &opt, 953)];
            v.extend(script(65));
            p.free(&Entry::Python(v))
        });
        for g in grads {
            self.free(out, g, zg);
        }
    }
}
