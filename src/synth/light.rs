//! A light device of a multi-device run: it keeps an exponential moving
//! average of the model's weights, updated after every optimizer step, and
//! gathers the step's metrics. A few allocations a step, against the
//! thousand or more of a device that trains.
//!
//! Owns the request stream only, as [`super::workload`] does.

use super::Rng;
use super::stacks::{Entry, PROJECT, StackPool, TORCH, py};
use super::workload::{Program, Req, Tensor, new_tensor};

const FOREACH: &str = "c10::ArrayRef<at::Tensor>, c10::Scalar const&";
const TO: &str = "at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>";
const EMPTY: &str = "c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>";

pub struct Light {
    pub pool: StackPool,
    rng: Rng,
    device: i64,
    /// Bytes of each tensor of the average, allocated on the first step.
    sizes: Vec<u64>,
    sites: Option<[u32; 5]>,
    next: Tensor,
    step: u64,
}

impl Light {
    pub fn new(seed: u64, device: i64) -> Light {
        let mut rng = Rng::new(seed ^ 0x4c49_4748_5400 ^ device as u64);
        let n = 6 + rng.below(11);
        let sizes = (0..n).map(|_| (2 + rng.below(63)) << 20).collect();
        Light {
            pool: StackPool::new(),
            rng,
            device,
            sizes,
            sites: None,
            next: 0,
            step: 0,
        }
    }

    fn sites(&mut self) -> [u32; 5] {
        if let Some(s) = self.sites {
            return s;
        }
        let ema = format!("{PROJECT}/ema.py");
        let train = format!("{PROJECT}/train.py");
        let foreach = format!("{TORCH}/utils/_foreach_utils.py");
        let outer = |line: u32| vec![py("main", &train, line), py("<module>", &train, 171)];
        let with = |mut v: Vec<_>, line: u32| {
            v.extend(outer(line));
            Entry::Python(v)
        };
        let p = &mut self.pool;
        let init = p.alloc(
            "_to_copy",
            TO,
            &with(
                vec![py("<dictcomp>", &ema, 31), py("__init__", &ema, 31)],
                120,
            ),
        );
        let update = |line: u32| {
            with(
                vec![py("_group_tensors", &foreach, 38), py("update", &ema, line)],
                151,
            )
        };
        let tmp = p.alloc("_foreach_sub", FOREACH, &update(48));
        let tmp_free = p.free(&update(50));
        let metrics = p.alloc(
            "empty",
            EMPTY,
            &with(vec![py("gather_metrics", &train, 96)], 153),
        );
        let metrics_free = p.free(&with(vec![py("gather_metrics", &train, 99)], 153));
        let s = [init, tmp, tmp_free, metrics, metrics_free];
        self.sites = Some(s);
        s
    }

    fn alloc(&mut self, out: &mut Vec<Req>, size: u64, stack: u32) -> Tensor {
        new_tensor(out, &mut self.next, size, 0, stack)
    }
}

impl Program for Light {
    fn next_step(&mut self, out: &mut Vec<Req>) {
        let [init, tmp, tmp_free, metrics, metrics_free] = self.sites();
        if self.step == 0 {
            for size in self.sizes.clone() {
                self.alloc(out, size, init);
            }
        }
        out.push(Req::Gap(20_000 + self.rng.below(200_000)));
        let sizes = self.sizes.clone();
        for chunk in sizes.chunks(8) {
            let largest = chunk.iter().copied().max().unwrap_or(0);
            let t = self.alloc(out, largest, tmp);
            out.push(Req::Free {
                t,
                stack: tmp_free,
                deferred: false,
            });
        }
        let size = 512 << self.rng.below(8);
        let m = self.alloc(out, size, metrics);
        out.push(Req::Free {
            t: m,
            stack: metrics_free,
            deferred: false,
        });
        self.step += 1;
    }
    fn recording(&self) -> bool {
        self.step > 1
    }
    fn pool(&mut self) -> &mut StackPool {
        &mut self.pool
    }
    fn describe(&self) -> String {
        format!(
            "device {}: a moving average of {} weight tensors",
            self.device,
            self.sizes.len()
        )
    }
}
