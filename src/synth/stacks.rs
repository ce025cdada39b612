//! The call stacks of a synthetic training run, as `_record_memory_history(
//! stacks="all")` records them: innermost first, the allocator's own C++
//! frames, the ATen operator's dispatch chain, then either the Python binding
//! with CPython's interpreter frames interleaved with the script's Python
//! frames, or (for backward) the autograd engine's worker thread, which has
//! no Python frames at all.
//!
//! Frames and stacks are interned: a frame is one (name, filename, line), a
//! stack one sequence of frames. The pool only grows in the order call sites
//! are first asked for, so it is a pure function of the workload.

use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SynthFrame {
    pub name: String,
    pub filename: String,
    pub line: u32,
}

/// Where Python code sits in the synthetic project.
pub const TORCH: &str = "/opt/conda/lib/python3.11/site-packages/torch";
pub const PROJECT: &str = "/workspace/llm-train";

/// A Python frame: function, file, line.
pub type Py = (&'static str, String, u32);

pub fn py(name: &'static str, file: &str, line: u32) -> Py {
    (name, file.to_string(), line)
}

/// How the operator was reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Entry {
    /// From Python (innermost Python frame first).
    Python(Vec<Py>),
    /// On the autograd engine's thread, from the backward node named.
    Autograd(&'static str),
}

#[derive(Default)]
pub struct StackPool {
    pub frames: Vec<SynthFrame>,
    frame_ix: HashMap<SynthFrame, u32>,
    pub stacks: Vec<Vec<u32>>,
    stack_ix: HashMap<Vec<u32>, u32>,
    /// Python frames of a launcher between the script's `main` and its
    /// `<module>` (innermost first), in every stack entered from Python.
    pub launcher: Vec<Py>,
    /// Backward nodes are custom `autograd.Function`s: their allocations
    /// and releases run Python code (`backward` in the project's kernels,
    /// `torch.autograd.function`) on the engine's thread.
    pub python_backward: bool,
}

const ALLOC_TOP: &[(&str, &str)] = &[
    ("torch::unwind::unwind()", "??"),
    ("torch::CapturedTraceback::gather(bool, bool, bool)", "??"),
    (
        "torch::cuda::(anonymous namespace)::gather_with_cpp()",
        "memory_snapshot.cpp",
    ),
    (
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
        "CUDACachingAllocator.cpp",
    ),
    (
        "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)",
        "",
    ),
    (
        "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)",
        "",
    ),
    (
        "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)",
        "??",
    ),
    (
        "at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)",
        "??",
    ),
    (
        "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)",
        "??",
    ),
];

const FREE_TOP: &[(&str, &str)] = &[
    ("torch::unwind::unwind()", "??"),
    ("torch::CapturedTraceback::gather(bool, bool, bool)", "??"),
    (
        "torch::cuda::(anonymous namespace)::gather_with_cpp()",
        "memory_snapshot.cpp",
    ),
    (
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::Block*)",
        "CUDACachingAllocator.cpp",
    ),
    (
        "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::free(void*)",
        "",
    ),
    ("c10::StorageImpl::~StorageImpl()", ""),
    (
        "c10::intrusive_ptr<c10::StorageImpl, c10::detail::intrusive_target_default_null_type<c10::StorageImpl> >::reset_()",
        "",
    ),
    ("c10::TensorImpl::~TensorImpl()", "TensorImpl.cpp"),
];

const ENGINE: &[(&str, &str)] = &[
    (
        "torch::autograd::call_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&)",
        "engine.cpp",
    ),
    (
        "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)",
        "engine.cpp",
    ),
    (
        "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
        "engine.cpp",
    ),
    (
        "torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)",
        "engine.cpp",
    ),
    (
        "torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)",
        "python_engine.cpp",
    ),
    (
        "std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (torch::autograd::Engine::*)(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool), torch::autograd::Engine*, signed char, std::shared_ptr<torch::autograd::ReadyQueue>, bool> > >::_M_run()",
        "??",
    ),
    ("execute_native_thread_routine", "thread.cc"),
    ("start_thread", "pthread_create.c"),
    ("__clone3", "clone3.S"),
];

/// CPython between two Python frames, and below the outermost one.
const EVAL: (&str, &str) = ("_PyEval_EvalFrameDefault", "??");
const CALLS: &[(&str, &str)] = &[
    ("_PyFunction_Vectorcall", "??"),
    ("_PyObject_MakeTpCall", "??"),
    ("PyObject_Call", "??"),
    ("_PyObject_Call_Prepend", "??"),
];
const MAIN: &[(&str, &str)] = &[
    ("PyEval_EvalCode", "??"),
    ("run_eval_code_obj", "pythonrun.c"),
    ("run_mod", "pythonrun.c"),
    ("pyrun_file", "pythonrun.c"),
    ("_PyRun_SimpleFileObject", "pythonrun.c"),
    ("_PyRun_AnyFileObject", "pythonrun.c"),
    ("Py_RunMain", "main.c"),
    ("Py_BytesMain", "main.c"),
    ("__libc_start_call_main", "libc_start_call_main.h"),
    ("__libc_start_main_impl", "libc-start.c"),
    ("_start", "??"),
];

impl StackPool {
    pub fn new() -> StackPool {
        StackPool::default()
    }

    fn frame(&mut self, name: &str, filename: &str, line: u32) -> u32 {
        let f = SynthFrame {
            name: name.to_string(),
            filename: filename.to_string(),
            line,
        };
        if let Some(&i) = self.frame_ix.get(&f) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(f.clone());
        self.frame_ix.insert(f, i);
        i
    }

    fn intern(&mut self, frames: Vec<u32>) -> u32 {
        if let Some(&i) = self.stack_ix.get(&frames) {
            return i;
        }
        let i = self.stacks.len() as u32;
        self.stacks.push(frames.clone());
        self.stack_ix.insert(frames, i);
        i
    }

    fn push_all(&mut self, out: &mut Vec<u32>, frames: &[(&str, &str)]) {
        for (n, f) in frames {
            out.push(self.frame(n, f, 0));
        }
    }

    /// Python frames with the interpreter's C frames between them; `salt`
    /// picks which calling convention CPython used at each step, as real
    /// stacks vary with how a function was called.
    fn push_python(&mut self, out: &mut Vec<u32>, py: &[Py], salt: usize) {
        let launched;
        let py = match py.last() {
            Some(m) if m.0 == "<module>" && !self.launcher.is_empty() => {
                let mut v = py[..py.len() - 1].to_vec();
                v.extend(self.launcher.iter().cloned());
                v.push(m.clone());
                launched = v;
                &launched[..]
            }
            _ => py,
        };
        self.push_interleaved(out, py, salt);
        self.push_all(out, MAIN);
    }

    fn push_interleaved(&mut self, out: &mut Vec<u32>, py: &[Py], salt: usize) {
        for (i, (name, file, line)) in py.iter().enumerate() {
            out.push(self.frame(name, file, *line));
            out.push(self.frame(EVAL.0, EVAL.1, 0));
            if i + 1 < py.len() {
                let (n, f) = CALLS[(salt + i) % CALLS.len()];
                out.push(self.frame(n, f, 0));
            }
        }
    }

    /// A custom `autograd.Function`'s backward, run by the engine's thread:
    /// the project's kernel code, `Function.apply`'s machinery, then the
    /// C++ node that called into Python.
    fn push_python_node(&mut self, out: &mut Vec<u32>, node: &str, salt: usize) {
        let kernels = format!("{PROJECT}/kernels/{}.py", node.trim_end_matches('0'));
        let function = format!("{TORCH}/autograd/function.py");
        let py = [
            (
                "backward",
                kernels.clone(),
                40 + (node.len() as u32 % 7) * 11,
            ),
            ("_backward_impl", kernels, 21),
            ("apply", function, 307),
            (
                "decorate_context",
                format!("{TORCH}/utils/_contextlib.py"),
                116,
            ),
        ];
        self.push_interleaved(out, &py, salt);
        out.push(self.frame(
            "torch::autograd::PyNode::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
            "python_function.cpp",
            0,
        ));
        out.push(self.frame(
            "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
            "function.h",
            0,
        ));
    }

    /// The ATen dispatch chain of operator `op` (e.g. `addmm`), innermost first.
    fn push_op(&mut self, out: &mut Vec<u32>, op: &str, sig: &str, variable_type_file: u32) {
        let frames = [
            (
                "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)".to_string(),
                "RegisterCUDA_0.cpp",
            ),
            (
                format!(
                    "at::(anonymous namespace)::structured_{op}_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)"
                ),
                "RegisterCUDA_0.cpp",
            ),
            (format!("at::meta::structured_{op}::meta({sig})"), "??"),
            (
                format!("at::(anonymous namespace)::wrapper_CUDA_{op}({sig})"),
                "RegisterCUDA_0.cpp",
            ),
            (
                format!(
                    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor ({sig}), &at::(anonymous namespace)::wrapper_CUDA_{op}>, at::Tensor, c10::guts::typelist::typelist<{sig}> >, at::Tensor ({sig})>::call(c10::OperatorKernel*, c10::DispatchKeySet, {sig})"
                ),
                "RegisterCUDA_0.cpp",
            ),
            (
                format!("at::_ops::{op}::redispatch(c10::DispatchKeySet, {sig})"),
                "??",
            ),
            (
                format!(
                    "torch::autograd::VariableType::(anonymous namespace)::{op}(c10::DispatchKeySet, {sig})"
                ),
                "",
            ),
            (format!("at::_ops::{op}::call({sig})"), "??"),
        ];
        let vt = format!("VariableType_{variable_type_file}.cpp");
        for (name, file) in frames.iter() {
            let file = if file.is_empty() { vt.as_str() } else { file };
            out.push(self.frame(name, file, 0));
        }
    }

    /// The stack of an allocation made by operator `op`.
    pub fn alloc(&mut self, op: &str, sig: &str, entry: &Entry) -> u32 {
        let mut out = Vec::with_capacity(64);
        self.push_all(&mut out, ALLOC_TOP);
        let vt = (op.len() % 4) as u32;
        self.push_op(&mut out, op, sig, vt);
        match entry {
            Entry::Python(py) => {
                let binding =
                    format!("torch::autograd::THPVariable_{op}(_object*, _object*, _object*)");
                out.push(self.frame(&binding, "python_variable_methods.cpp", 0));
                self.push_python(&mut out, py, op.len());
            }
            Entry::Autograd(node) if self.python_backward => {
                let binding =
                    format!("torch::autograd::THPVariable_{op}(_object*, _object*, _object*)");
                out.push(self.frame(&binding, "python_variable_methods.cpp", 0));
                self.push_python_node(&mut out, node, op.len());
                self.push_all(&mut out, ENGINE);
            }
            Entry::Autograd(node) => {
                let apply = format!(
                    "torch::autograd::generated::{node}::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"
                );
                out.push(self.frame(&apply, "Functions.cpp", 0));
                out.push(self.frame(
                    "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
                    "function.h",
                    0,
                ));
                self.push_all(&mut out, ENGINE);
            }
        }
        self.intern(out)
    }

    /// The stack of a free: the tensor's last reference dropped in Python,
    /// or a saved variable released by a backward node.
    pub fn free(&mut self, entry: &Entry) -> u32 {
        let mut out = Vec::with_capacity(48);
        self.push_all(&mut out, FREE_TOP);
        match entry {
            Entry::Python(py) => {
                out.push(self.frame("THPVariable_clear(THPVariable*)", "python_variable.cpp", 0));
                out.push(self.frame("THPVariable_dealloc(_object*)", "python_variable.cpp", 0));
                self.push_python(&mut out, py, 1);
            }
            Entry::Autograd(node) if self.python_backward => {
                out.push(self.frame("THPVariable_clear(THPVariable*)", "python_variable.cpp", 0));
                out.push(self.frame("THPVariable_dealloc(_object*)", "python_variable.cpp", 0));
                self.push_python_node(&mut out, node, 1);
                self.push_all(&mut out, ENGINE);
            }
            Entry::Autograd(node) => {
                out.push(self.frame(
                    "torch::autograd::SavedVariable::reset_data()",
                    "saved_variable.cpp",
                    0,
                ));
                let release = format!("torch::autograd::generated::{node}::release_variables()");
                out.push(self.frame(&release, "Functions.h", 0));
                self.push_all(&mut out, ENGINE);
            }
        }
        self.intern(out)
    }

    /// The stack of a `torch.cuda.empty_cache()` call made from Python
    /// (the context of the segments it releases and the frees it reaps).
    pub fn empty_cache(&mut self, py: &[Py]) -> u32 {
        let mut out = Vec::with_capacity(40);
        self.push_all(&mut out, &FREE_TOP[..3]);
        self.push_all(&mut out, EMPTY_CACHE);
        let mut v = vec![("empty_cache", format!("{TORCH}/cuda/memory.py"), 224)];
        v.extend_from_slice(py);
        self.push_python(&mut out, &v, 2);
        self.intern(out)
    }
}

const EMPTY_CACHE: &[(&str, &str)] = &[
    (
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::emptyCache(c10::MempoolId_t)",
        "CUDACachingAllocator.cpp",
    ),
    (
        "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache(c10::MempoolId_t)",
        "CUDACachingAllocator.cpp",
    ),
    ("THCPModule_emptyCache(_object*, _object*)", "Module.cpp"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_interned_and_deep() {
        let mut p = StackPool::new();
        let py = Entry::Python(vec![
            py("forward", &format!("{TORCH}/nn/modules/linear.py"), 125),
            py("train_step", &format!("{PROJECT}/train.py"), 88),
        ]);
        let a = p.alloc("addmm", "at::Tensor const&, at::Tensor const&", &py);
        let b = p.alloc("addmm", "at::Tensor const&, at::Tensor const&", &py);
        let c = p.alloc(
            "addmm",
            "at::Tensor const&, at::Tensor const&",
            &Entry::Autograd("AddmmBackward0"),
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(p.stacks[a as usize].len() > 30);
        // The allocator's frames are shared by both stacks.
        assert_eq!(p.stacks[a as usize][..9], p.stacks[c as usize][..9]);
        let last = *p.stacks[a as usize].last().unwrap();
        assert_eq!(p.frames[last as usize].name, "_start");
    }
}
