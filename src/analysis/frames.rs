//! Stack frames for people: the frame filter of PyTorch's memory viewer and
//! the "call site" of an allocation.
//!
//! Owns: deciding which frames of an interned stack are shown (the same list
//! MemoryViz.js and `_memory_viz.py` use, spec §1.8), classifying a frame as
//! user code, PyTorch, Python internals or native code, and naming the call
//! site (the innermost user frame). It reads the model's string and frame
//! tables and never changes them; it knows nothing of blocks or segments.
//!
//! Frames are innermost-first (index 0 is where the allocation happened), as
//! in the snapshot.

use crate::model::{Frame, FrameId, Snapshot, StackId};
use serde::Serialize;

/// Function-name substrings the viewer drops (spec §1.8).
pub const OMIT_FUNCTIONS: [&str; 8] = [
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
];

/// File-name substrings the viewer drops (spec §1.8).
pub const OMIT_FILENAMES: [&str; 10] = [
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
];

/// Whether PyTorch's viewer shows this frame. Plain substring tests, exactly
/// as the viewer does them: `RegisterCUDA.cpp` without a directory is kept
/// because `/Register` does not match it.
pub fn viewer_keeps(name: &str, filename: &str) -> bool {
    !OMIT_FUNCTIONS.iter().any(|o| name.contains(o))
        && !OMIT_FILENAMES.iter().any(|o| filename.contains(o))
}

/// Whether the viewer shows frame `f`.
fn frame_kept(snap: &Snapshot, f: FrameId) -> bool {
    let fr = snap.frame(f);
    viewer_keeps(snap.str(fr.name), snap.str(fr.filename))
}

/// The frames of a stack the viewer would show, innermost first.
pub fn filtered(snap: &Snapshot, stack: StackId) -> Vec<FrameId> {
    snap.stack(stack)
        .iter()
        .copied()
        .filter(|&f| frame_kept(snap, f))
        .collect()
}

/// What the call-site rules read of each frame of a snapshot (whether the
/// viewer shows it, and its [`FrameKind`]), worked out once a frame.
/// Stacks share frames (every stack of a program has the same outermost
/// ones, and C++ stacks the same innermost), so a command that names the
/// sites of thousands of deep stacks reads each frame's strings once
/// instead of once a stack. [`FrameFacts::filtered`] and
/// [`FrameFacts::call_site`] answer as [`filtered`] and [`call_site`] do.
pub struct FrameFacts<'a> {
    snap: &'a Snapshot,
    /// Per frame: 0 until worked out, else `KNOWN`, `KEPT` and the kind.
    facts: Vec<std::cell::Cell<u8>>,
}

impl<'a> FrameFacts<'a> {
    const KNOWN: u8 = 0x80;
    const KEPT: u8 = 0x40;
    const KINDS: [FrameKind; 4] = [
        FrameKind::User,
        FrameKind::Torch,
        FrameKind::PythonInternal,
        FrameKind::Native,
    ];

    pub fn new(snap: &'a Snapshot) -> Self {
        FrameFacts {
            snap,
            facts: vec![std::cell::Cell::new(0); snap.frames.len()],
        }
    }

    fn facts(&self, f: FrameId) -> u8 {
        let cell = &self.facts[f.0 as usize];
        let mut v = cell.get();
        if v == 0 {
            let kind = classify(self.snap.str(self.snap.frame(f).filename));
            let k = Self::KINDS.iter().position(|&x| x == kind).unwrap_or(0) as u8;
            v = Self::KNOWN
                | if frame_kept(self.snap, f) {
                    Self::KEPT
                } else {
                    0
                }
                | k;
            cell.set(v);
        }
        v
    }

    pub fn snap(&self) -> &'a Snapshot {
        self.snap
    }

    /// Whether the viewer shows frame `f`.
    pub fn kept(&self, f: FrameId) -> bool {
        self.facts(f) & Self::KEPT != 0
    }

    /// [`classify`] of frame `f`.
    pub fn kind(&self, f: FrameId) -> FrameKind {
        Self::KINDS[(self.facts(f) & 3) as usize]
    }

    /// [`filtered`].
    pub fn filtered(&self, stack: StackId) -> Vec<FrameId> {
        (self.snap.stack(stack).iter().copied())
            .filter(|&f| self.kept(f))
            .collect()
    }

    /// [`call_site`].
    pub fn call_site(&self, stack: StackId) -> CallSite {
        self.call_site_in(&self.filtered(stack))
    }

    /// [`call_site_in`].
    pub fn call_site_in(&self, kept: &[FrameId]) -> CallSite {
        call_site_by(self.snap, kept, |f| self.kind(f))
    }
}

/// What kind of code a frame belongs to.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// Python code outside PyTorch and the standard library: the program's
    /// own files and third-party libraries (transformers, peft, …).
    User,
    /// PyTorch's own Python (`…/site-packages/torch/…`, FX-generated code).
    Torch,
    /// The Python standard library and interpreter pseudo-files (`<frozen …>`).
    PythonInternal,
    /// C, C++ and CUDA frames (allocator, dispatcher, CPython's C code).
    Native,
}

/// Top-level entries of the `torch` package, to recognise a source checkout
/// (`~/pytorch/torch/nn/…`) without mistaking a directory that merely happens
/// to be named `torch` (a virtualenv, say) for PyTorch.
const TORCH_ENTRIES: &[&str] = &[
    "__init__.py",
    "_C",
    "_compile.py",
    "_custom_op",
    "_decomp",
    "_dynamo",
    "_export",
    "_functorch",
    "_guards.py",
    "_higher_order_ops",
    "_inductor",
    "_jit_internal.py",
    "_library",
    "_logging",
    "_meta_registrations.py",
    "_ops.py",
    "_prims",
    "_prims_common",
    "_refs",
    "_subclasses",
    "_tensor.py",
    "_tensor_str.py",
    "_utils.py",
    "_vmap_internals.py",
    "amp",
    "ao",
    "autograd",
    "backends",
    "compiler",
    "cuda",
    "distributed",
    "distributions",
    "export",
    "fft",
    "func",
    "functional.py",
    "fx",
    "hub.py",
    "jit",
    "library.py",
    "linalg",
    "masked",
    "multiprocessing",
    "nested",
    "nn",
    "onnx",
    "optim",
    "overrides.py",
    "profiler",
    "random.py",
    "serialization.py",
    "sparse",
    "special",
    "storage.py",
    "testing",
    "utils",
];

/// Path components of a file name, `/` and `\` both separating (Windows
/// snapshots carry `C:\…\site-packages\torch\…`).
fn components(filename: &str) -> Vec<&str> {
    filename
        .split(['/', '\\'])
        .filter(|c| !c.is_empty())
        .collect()
}

/// The last path component (`C:\a\model.py` → `model.py`).
pub fn basename(filename: &str) -> &str {
    filename.rsplit(['/', '\\']).next().unwrap_or(filename)
}

fn is_python_source(filename: &str) -> bool {
    let lower = filename.to_ascii_lowercase();
    lower.ends_with(".py") || lower.ends_with(".pyx") || filename.starts_with('<')
}

fn is_torch_path(comps: &[&str]) -> bool {
    comps.iter().enumerate().any(|(i, c)| {
        (*c == "torch" || *c == "functorch")
            && i + 1 < comps.len()
            && ((i > 0 && matches!(comps[i - 1], "site-packages" | "dist-packages"))
                || TORCH_ENTRIES.contains(&comps[i + 1]))
    })
}

fn is_stdlib_path(filename: &str, comps: &[&str]) -> bool {
    if comps
        .iter()
        .any(|c| matches!(*c, "site-packages" | "dist-packages"))
    {
        return false;
    }
    // POSIX installs: …/lib/python3.11/x.py; Windows: …\Lib\x.py (capital L,
    // which is how every Windows Python spells it, so a project's own `lib`
    // folder is not taken for the standard library).
    comps.windows(2).any(|w| {
        (w[0] == "lib" && w[1].starts_with("python")) || (w[0] == "Lib" && filename.contains('\\'))
    })
}

/// Classifies one frame.
pub fn classify(filename: &str) -> FrameKind {
    if !is_python_source(filename) {
        return FrameKind::Native;
    }
    if let Some(pseudo) = filename.strip_prefix('<') {
        // `<ipython-input-3-…>` and `<stdin>` are the user typing code;
        // `<eval_with_key>.N` is torch.fx generated code; the rest
        // (`<frozen importlib._bootstrap>`, `<string>`) is interpreter plumbing.
        return if pseudo.starts_with("ipython-input") || pseudo.starts_with("stdin") {
            FrameKind::User
        } else if pseudo.starts_with("eval_with_key") {
            FrameKind::Torch
        } else {
            FrameKind::PythonInternal
        };
    }
    let comps = components(filename);
    if is_torch_path(&comps) {
        FrameKind::Torch
    } else if is_stdlib_path(filename, &comps) {
        FrameKind::PythonInternal
    } else {
        FrameKind::User
    }
}

/// How a call site was found, from most to least useful.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum SiteKind {
    /// The innermost user frame.
    User,
    /// No user frame; the innermost PyTorch Python frame.
    Torch,
    /// No Python frame at all (e.g. allocated by autograd's backward thread);
    /// the ATen operator that allocated.
    NativeOp,
    /// No Python frame and no operator; the innermost frame shown.
    Native,
    /// No stack was recorded for this allocation.
    Unknown,
}

/// Where an allocation came from, in the program's own terms.
#[derive(Serialize, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallSite {
    pub kind: SiteKind,
    /// Full file name as recorded (empty for operators and unknown sites).
    pub file: String,
    pub line: i64,
    /// Function name, or the operator (`aten::mm`).
    pub function: String,
}

impl CallSite {
    pub fn unknown() -> CallSite {
        CallSite {
            kind: SiteKind::Unknown,
            file: String::new(),
            line: 0,
            function: String::new(),
        }
    }

    /// `model.py:524 (forward)`, `aten::mm (no Python frame)`, …
    pub fn label(&self) -> String {
        match self.kind {
            SiteKind::User | SiteKind::Torch => {
                format!("{}:{} ({})", basename(&self.file), self.line, self.function)
            }
            SiteKind::NativeOp => format!("{} (no Python frame)", self.function),
            SiteKind::Native => format!("{} (native)", short_native(&self.function)),
            SiteKind::Unknown => "(no stack recorded)".to_string(),
        }
    }

    /// The label without the line (`model.py (forward)`), for comparing two
    /// runs: an edit above a function moves every line below it, and the
    /// allocations it makes should not all look new.
    pub fn label_without_line(&self) -> String {
        match self.kind {
            SiteKind::User | SiteKind::Torch => {
                format!("{} ({})", basename(&self.file), self.function)
            }
            _ => self.label(),
        }
    }
}

/// A C++ name without its argument list, so a table cell stays readable.
fn short_native(name: &str) -> &str {
    match name.find('(') {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

/// `at::_ops::mm::call(…)` → `aten::mm`.
fn aten_op(name: &str) -> Option<String> {
    let rest = name.split("at::_ops::").nth(1)?;
    let op = rest.split("::").next()?;
    if op.is_empty() {
        None
    } else {
        Some(format!("aten::{op}"))
    }
}

fn site_of(snap: &Snapshot, kind: SiteKind, f: &Frame) -> CallSite {
    CallSite {
        kind,
        file: snap.str(f.filename).to_string(),
        line: f.line,
        function: snap.str(f.name).to_string(),
    }
}

/// The call site of a stack: the innermost user frame among those the viewer
/// shows; failing that the innermost PyTorch Python frame, then the ATen
/// operator, then the innermost frame shown.
pub fn call_site(snap: &Snapshot, stack: StackId) -> CallSite {
    call_site_in(snap, &filtered(snap, stack))
}

/// [`call_site`] of a stack whose shown frames, `kept`, are at hand.
pub fn call_site_in(snap: &Snapshot, kept: &[FrameId]) -> CallSite {
    call_site_by(snap, kept, |f| classify(snap.str(snap.frame(f).filename)))
}

/// [`call_site_in`] with each frame's kind from `kind`.
fn call_site_by(
    snap: &Snapshot,
    kept: &[FrameId],
    kind: impl Fn(FrameId) -> FrameKind,
) -> CallSite {
    let frames: Vec<&Frame> = kept.iter().map(|&f| snap.frame(f)).collect();
    let kinds: Vec<FrameKind> = kept.iter().map(|&f| kind(f)).collect();
    if let Some(i) = kinds.iter().position(|k| *k == FrameKind::User) {
        return site_of(snap, SiteKind::User, frames[i]);
    }
    if let Some(i) = kinds.iter().position(|k| *k == FrameKind::Torch) {
        return site_of(snap, SiteKind::Torch, frames[i]);
    }
    if let Some(op) = frames.iter().find_map(|f| aten_op(snap.str(f.name))) {
        return CallSite {
            kind: SiteKind::NativeOp,
            file: String::new(),
            line: 0,
            function: op,
        };
    }
    match frames.first() {
        Some(f) => site_of(snap, SiteKind::Native, f),
        None => CallSite::unknown(),
    }
}

/// One frame as the viewer prints it: `file:line:name`, with the file's
/// base name (or its full name when `full`).
pub fn frame_label(snap: &Snapshot, f: FrameId, full: bool) -> String {
    frame_display(snap, f, full).to_string()
}

/// [`frame_label`], to be written where it goes rather than made a string.
pub fn frame_display(snap: &Snapshot, f: FrameId, full: bool) -> impl std::fmt::Display + '_ {
    let fr = snap.frame(f);
    let file = snap.str(fr.filename);
    let file = if full { file } else { basename(file) };
    FrameLabel(file, fr.line, snap.str(fr.name))
}

struct FrameLabel<'a>(&'a str, i64, &'a str);

impl std::fmt::Display for FrameLabel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.0, self.1, self.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Interner, Snapshot};

    /// Each (file, line, function) interned as a frame.
    fn frame_ids(i: &mut Interner, frames: &[(&str, i64, &str)]) -> Vec<FrameId> {
        frames
            .iter()
            .map(|(file, line, name)| {
                let f = Frame {
                    filename: i.string(file).unwrap(),
                    line: *line,
                    name: i.string(name).unwrap(),
                };
                i.frame(f)
            })
            .collect()
    }

    fn snap_with(frames: &[(&str, i64, &str)]) -> (Snapshot, StackId) {
        let mut i = Interner::new();
        let ids = frame_ids(&mut i, frames);
        let st = i.stack(ids);
        let mut s = Snapshot::default();
        i.finish(&mut s);
        (s, st)
    }

    #[test]
    fn viewer_filter_matches_the_spec_list() {
        assert!(!viewer_keeps("torch::unwind::unwind()", "??"));
        assert!(!viewer_keeps("_PyEval_EvalFrameDefault", "Python/ceval.c"));
        assert!(!viewer_keeps("x", "/usr/src/python/Objects/call.c"));
        assert!(!viewer_keeps("x", "aten/src/ATen/core/boxing/impl.h"));
        assert!(!viewer_keeps("x", "build/aten/src/ATen/RegisterCUDA.cpp"));
        // No directory, so "/Register" does not match: the viewer keeps it.
        assert!(viewer_keeps("x", "RegisterCUDA_0.cpp"));
        assert!(viewer_keeps("forward", "/home/u/model.py"));
    }

    #[test]
    fn classifies_paths() {
        use FrameKind::*;
        assert_eq!(classify("/home/u/proj/model.py"), User);
        assert_eq!(
            classify("/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py"),
            Torch
        );
        assert_eq!(
            classify(r"D:\Dev\a\.venv\Lib\site-packages\torch\functional.py"),
            Torch
        );
        // A virtualenv that happens to be called "torch" is not PyTorch.
        assert_eq!(
            classify("/home/b/torch/lib/python3.10/runpy.py"),
            PythonInternal
        );
        assert_eq!(classify("/home/b/torch/myproj/train.py"), User);
        assert_eq!(
            classify("/home/u/src/pytorch/torch/nn/functional.py"),
            Torch
        );
        assert_eq!(
            classify("/root/miniconda3/lib/python3.10/site-packages/transformers/x.py"),
            User
        );
        assert_eq!(classify(r"C:\Python311\Lib\contextlib.py"), PythonInternal);
        assert_eq!(classify(r"C:\research\proj\lib\utils.py"), User);
        assert_eq!(classify("<frozen runpy>"), PythonInternal);
        assert_eq!(classify("<eval_with_key>.3"), Torch);
        assert_eq!(classify("<ipython-input-3-abc>"), User);
        assert_eq!(classify("CUDACachingAllocator.cpp"), Native);
        assert_eq!(classify("??"), Native);
        assert_eq!(classify(""), Native);
    }

    #[test]
    fn call_site_is_the_innermost_user_frame() {
        let (s, st) = snap_with(&[
            ("??", 0, "torch::unwind::unwind()"),
            (
                "CUDACachingAllocator.cpp",
                0,
                "c10::cuda::malloc(unsigned long)",
            ),
            (
                "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py",
                125,
                "forward",
            ),
            ("/home/u/proj/model.py", 10, "forward"),
            ("/home/u/proj/train.py", 50, "main"),
        ]);
        let c = call_site(&s, st);
        assert_eq!(c.kind, SiteKind::User);
        assert_eq!(c.label(), "model.py:10 (forward)");
        assert_eq!(c.label_without_line(), "model.py (forward)");
        assert_eq!(c.file, "/home/u/proj/model.py");
        assert_eq!(filtered(&s, st).len(), 4);
    }

    #[test]
    fn call_site_fallbacks() {
        let (s, st) = snap_with(&[
            ("??", 0, "at::_ops::mm::redispatch(c10::DispatchKeySet)"),
            ("??", 0, "at::_ops::mm::call(at::Tensor const&)"),
        ]);
        assert_eq!(call_site(&s, st).label(), "aten::mm (no Python frame)");
        assert_eq!(
            call_site(&s, st).label_without_line(),
            "aten::mm (no Python frame)"
        );
        let (s, st) = snap_with(&[
            ("/x/site-packages/torch/_tensor.py", 99, "backward"),
            ("/usr/lib/python3.10/threading.py", 1016, "run"),
        ]);
        let c = call_site(&s, st);
        assert_eq!(
            (c.kind, c.label()),
            (SiteKind::Torch, "_tensor.py:99 (backward)".into())
        );
        let (s, st) = snap_with(&[]);
        assert_eq!(call_site(&s, st).kind, SiteKind::Unknown);
        let (s, st) = snap_with(&[("foo.cu", 3, "launch(int)")]);
        assert_eq!(call_site(&s, st).label(), "launch (native)");
    }

    #[test]
    fn frame_facts_answer_as_the_functions_do() {
        // Stacks of every kind sharing frames, so that later stacks find
        // their frames worked out by earlier ones.
        let pool: &[(&str, i64, &str)] = &[
            ("??", 0, "torch::unwind::unwind()"),
            ("CUDACachingAllocator.cpp", 0, "c10::cuda::malloc"),
            ("??", 0, "at::_ops::mm::call(at::Tensor const&)"),
            ("/x/site-packages/torch/_tensor.py", 99, "backward"),
            (
                "/x/site-packages/torch/nn/modules/linear.py",
                125,
                "forward",
            ),
            ("/usr/lib/python3.10/threading.py", 1016, "run"),
            ("/home/u/proj/model.py", 524, "forward"),
            ("<frozen importlib._bootstrap>", 1, "_call"),
            ("??", 0, "_PyEval_EvalFrameDefault"),
            ("??", 0, "__libc_start_main"),
        ];
        let mut i = Interner::new();
        let ids = frame_ids(&mut i, pool);
        let mut next = crate::model::test_support::below(0x5eed);
        let stacks: Vec<StackId> = (0..200)
            .map(|_| {
                let n = next(12) as usize;
                i.stack(
                    (0..n)
                        .map(|_| ids[next(ids.len() as u64) as usize])
                        .collect(),
                )
            })
            .collect();
        let mut s = Snapshot::default();
        i.finish(&mut s);
        let facts = FrameFacts::new(&s);
        let mut kinds = std::collections::BTreeSet::new();
        for &st in &stacks {
            assert_eq!(facts.filtered(st), filtered(&s, st));
            let c = facts.call_site(st);
            kinds.insert(c.kind);
            assert_eq!(c, call_site(&s, st));
        }
        // Every kind of site was asked for.
        assert_eq!(kinds.len(), 5, "{kinds:?}");
    }
}
