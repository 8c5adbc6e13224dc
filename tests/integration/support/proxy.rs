//! A fault-injecting HTTP proxy between clients and a server: it forwards `/sync/*` requests and,
//! as scripted or at random (seeded), fails them before or after forwarding (503, or a dropped
//! connection), forwards them twice, or delays them. Faults after forwarding are the hard ones:
//! the server applied the request and the client never hears of it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// What the proxy does to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Forward it and pass the answer on.
    Pass,
    /// Answer 503 without forwarding.
    FailBefore,
    /// Forward it, then answer 503 instead of the server's answer.
    FailAfter,
    /// Close the connection without forwarding.
    DropBefore,
    /// Forward it, then close the connection instead of answering.
    DropAfter,
    /// Forward it twice; answer with the second answer.
    Duplicate,
    /// Wait, then forward.
    Delay(Duration),
}

enum Mode {
    Script(VecDeque<(String, Fault)>),
    Random { rng: u64, rate: f64 },
}

struct State {
    upstream: String,
    http: reqwest::Client,
    mode: Mutex<Mode>,
    injected: Mutex<Vec<Fault>>,
}

pub(crate) struct FaultProxy {
    pub(crate) addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy to the server at `upstream` (`http://host:port`) that passes everything on until
    /// told otherwise.
    pub(crate) async fn start(upstream: &str) -> FaultProxy {
        let state = Arc::new(State {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            mode: Mutex::new(Mode::Script(VecDeque::new())),
            injected: Mutex::new(Vec::new()),
        });
        let router = axum::Router::new().fallback({
            let state = state.clone();
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = state.clone();
                async move { forward(&state, method, uri, headers, body).await }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        FaultProxy { addr, state, task }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Apply `fault` to the next request whose path starts with `path`.
    pub(crate) fn script(&self, path: &str, fault: Fault) {
        let mut mode = self.state.mode.lock().unwrap();
        match &mut *mode {
            Mode::Script(queue) => queue.push_back((path.to_owned(), fault)),
            other => *other = Mode::Script(VecDeque::from([(path.to_owned(), fault)])),
        }
    }

    /// From now on, a fault of any kind for a share `rate` of requests, drawn from `seed`.
    pub(crate) fn random(&self, seed: u64, rate: f64) {
        *self.state.mode.lock().unwrap() = Mode::Random { rng: seed | 1, rate };
    }

    /// Stop injecting faults.
    pub(crate) fn calm(&self) {
        *self.state.mode.lock().unwrap() = Mode::Script(VecDeque::new());
    }

    /// The faults injected so far.
    pub(crate) fn injected(&self) -> Vec<Fault> {
        self.state.injected.lock().unwrap().clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

fn choose(state: &State, path: &str) -> Fault {
    if !path.starts_with("/sync/") {
        return Fault::Pass;
    }
    let mut mode = state.mode.lock().unwrap();
    let fault = match &mut *mode {
        Mode::Script(queue) => match queue.iter().position(|(prefix, _)| path.starts_with(prefix.as_str())) {
            Some(i) => queue.remove(i).map_or(Fault::Pass, |(_, fault)| fault),
            None => Fault::Pass,
        },
        Mode::Random { rng, rate } => {
            let roll = (next(rng) % 10_000) as f64 / 10_000.0;
            if roll >= *rate {
                Fault::Pass
            } else {
                match next(rng) % 6 {
                    0 => Fault::FailBefore,
                    1 => Fault::FailAfter,
                    2 => Fault::DropBefore,
                    3 => Fault::DropAfter,
                    4 => Fault::Duplicate,
                    _ => Fault::Delay(Duration::from_millis(next(rng) % 300)),
                }
            }
        }
    };
    if fault != Fault::Pass {
        state.injected.lock().unwrap().push(fault);
    }
    fault
}

fn unavailable() -> Response {
    let body = r#"{"type":"urn:engine:problem:retry_later","title":"Retry later","status":503,"code":"retry_later","detail":"injected"}"#;
    (StatusCode::SERVICE_UNAVAILABLE, [("content-type", "application/problem+json"), ("retry-after", "0")], body)
        .into_response()
}

/// A response whose body fails at once: the connection closes without an answer.
fn dropped() -> Response {
    let failing = futures_util::stream::once(async { Err::<Bytes, std::io::Error>(std::io::Error::other("dropped")) });
    Response::new(Body::from_stream(failing))
}

/// Send a request to `upstream` with its method, path, query, credentials and body, and give
/// back the answer; none when it did not come.
pub(crate) async fn send(
    http: &reqwest::Client,
    upstream: &str,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<Response> {
    let url = format!("{upstream}{}", uri.path_and_query().map_or("/", |p| p.as_str()));
    let mut request = http.request(method.clone(), url).body(body.clone());
    for name in ["authorization", "content-type"] {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value);
        }
    }
    let response = request.send().await.ok()?;
    let status = response.status();
    let mut out = Response::builder().status(status);
    for (name, value) in response.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            out = out.header(name, value);
        }
    }
    let bytes = response.bytes().await.ok()?;
    out.body(Body::from(bytes)).ok()
}

async fn forward(state: &State, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let fault = choose(state, uri.path());
    match fault {
        Fault::FailBefore => return unavailable(),
        Fault::DropBefore => return dropped(),
        Fault::Delay(wait) => tokio::time::sleep(wait).await,
        _ => {}
    }
    let mut answer = send(&state.http, &state.upstream, &method, &uri, &headers, &body).await;
    if fault == Fault::Duplicate {
        answer = send(&state.http, &state.upstream, &method, &uri, &headers, &body).await;
    }
    match fault {
        Fault::FailAfter => unavailable(),
        Fault::DropAfter => dropped(),
        _ => answer.unwrap_or_else(|| (StatusCode::BAD_GATEWAY, "upstream unreachable").into_response()),
    }
}
