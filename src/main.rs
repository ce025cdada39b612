/// Large blocks on huge pages: see `fragscope::core::alloc`.
#[global_allocator]
static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

fn main() {
    std::process::exit(fragscope::cli::main_with_args(std::env::args_os()));
}
