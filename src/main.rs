fn main() {
    println!("node-lifecycled {}", env!("CARGO_PKG_VERSION"));
}
