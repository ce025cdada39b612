//! docs/reading-a-report.md quotes figures from the real files: each quoted
//! figure must be in the guide and in what the command prints today, so the
//! guide cannot drift from the tool.

use crate::util::*;

/// (file, command and flags, figures the guide quotes from its output).
const QUOTES: &[(&str, &[&str], &[&str])] = &[
    (
        "wedsonlin_cs336_medium_ctx512_train_torch2.11.pickle",
        &["culprits"],
        &[
            "16.00 MiB",
            "16.94 MiB",
            "22 blocks from aten::empty_strided (no Python frame) strand 695.77 MiB across 19 segments",
        ],
    ),
    (
        "wedsonlin_cs336_medium_ctx512_train_torch2.11.pickle",
        &["stats"],
        &["5.42 GiB", "80.00 MiB", "98.6%"],
    ),
    (
        "wedsonlin_cs336_medium_ctx512_train_torch2.11.pickle",
        &["simulate"],
        &["11.79 GiB", "11.57 GiB", "14.05 GiB"],
    ),
    (
        "kkaitlyn_cs336_1457-segments_empty-trace.pickle",
        &["stats"],
        &["50.91 GiB", "403.72 MiB"],
    ),
    (
        "magma27_cs336_torch2.11_user_metadata.pickle",
        &["timeline"],
        &[
            "11.92 GiB",
            "97.4%",
            "12.97 GiB",
            "13.21 GiB",
            "241.38 MiB",
            "39.41 MiB",
        ],
    ),
    (
        "verl_vllm-rollout_mempool-private-pools_pending-free.pickle",
        &["timeline", "--at", "end"],
        &["569.70 MiB", "1.19 GiB"],
    ),
    (
        "constructor-sun_code-location_oom_expandable_3dev.pickle",
        &["oom"],
        &["4.94 GiB", "78.29 GiB", "132.93 MiB"],
    ),
    (
        "constructor-sun_code-location_oom_expandable_3dev.pickle",
        &["simulate", "--device", "1"],
        &["83.23 GiB", "78.51 GiB"],
    ),
];

#[test]
fn guide_figures_are_what_the_commands_print() {
    let guide = std::fs::read_to_string(root().join("docs/reading-a-report.md")).unwrap();
    let Some(real) = real_dir() else { return };
    for (file, args, figures) in QUOTES {
        let path = real.join(file).to_string_lossy().into_owned();
        let mut argv: Vec<&str> = args.to_vec();
        argv.push(&path);
        let r = run(argv);
        let out = r.expect_code(0).stdout();
        for f in *figures {
            assert!(guide.contains(f), "the guide no longer quotes {f:?}");
            assert!(
                out.contains(f),
                "{}: {f:?} not in its output:\n{out}",
                r.cmd
            );
        }
    }
}
