fn main() {
    let _app = engine::app! {
        mutators: [],
    };
}
