//! `cargo run -p example-notes` prints the notes app's contract (the server arrives with the
//! server issue and will serve it instead).

fn main() {
    let contract = engine::contract(&example_notes::app());
    println!("{}", serde_json::to_string_pretty(&contract).expect("the contract serializes"));
}
