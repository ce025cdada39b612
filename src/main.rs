/// Large blocks on huge pages: see `fragscope::alloc`.
#[global_allocator]
static ALLOC: fragscope::alloc::HugePages = fragscope::alloc::HugePages;

fn main() {
    std::process::exit(fragscope::cli::main_with_args(std::env::args_os()));
}
