fn main() {
    std::process::exit(fragscope::cli::main_with_args(std::env::args_os()));
}
