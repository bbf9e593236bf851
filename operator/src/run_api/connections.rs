//! The run API's connections as tasks of the server's own: when the server ends (the operator
//! stops, or is aborted as a crash would end it) every connection ends with it, so no runner
//! goes on long-polling a replica whose caches have stopped. `axum::serve` spawns connections
//! on the runtime, where they would outlive the server.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::serve::Listener;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;
use tracing::debug;

/// How long requests in flight may finish once the server stops; long polls are cut then
/// (the runner asks again, of another replica).
const GRACE: Duration = Duration::from_secs(5);

/// Serves `app` on `listener`'s connections until `shutdown` resolves.
pub async fn serve<L>(mut listener: L, app: Router, shutdown: impl Future<Output = ()>)
where
    L: Listener,
    L::Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            (io, _) = listener.accept() => {
                let service = TowerToHyperService::new(app.clone());
                connections.spawn(async move {
                    let served = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(io), service)
                        .await;
                    if let Err(error) = served {
                        debug!(%error, "a run API connection ended");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    let finished = async { while connections.join_next().await.is_some() {} };
    // Past the grace, dropping the set aborts what is left.
    let _ = tokio::time::timeout(GRACE, finished).await;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::Notify;

    use super::*;

    async fn request(stream: &mut TcpStream, path: &str) -> String {
        let head = format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0; 1024];
        let n = stream.read(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer[..n]).into_owned()
    }

    #[tokio::test]
    async fn connections_end_with_the_server() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/", get(|| async { "hello" }));
        let server = tokio::spawn(serve(listener, app, std::future::pending()));
        let mut kept_alive = TcpStream::connect(addr).await.unwrap();
        assert!(request(&mut kept_alive, "/").await.ends_with("hello"));
        server.abort();
        let _ = server.await;
        let mut rest = Vec::new();
        let read = tokio::time::timeout(GRACE, kept_alive.read_to_end(&mut rest)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "the kept-alive connection is closed: {read:?}"
        );
        assert!(TcpStream::connect(addr).await.is_err(), "nothing listens");
    }

    #[tokio::test(start_paused = true)]
    async fn a_shutdown_lets_requests_in_flight_finish_within_the_grace() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let slow = release.clone();
        let app = Router::new().route(
            "/slow",
            get(move || {
                let slow = slow.clone();
                async move {
                    slow.notified().await;
                    "late"
                }
            }),
        );
        let stopped = stop.clone();
        let server = tokio::spawn(serve(listener, app, async move {
            stopped.notified().await;
        }));
        let mut client = TcpStream::connect(addr).await.unwrap();
        let answer = tokio::spawn(async move { request(&mut client, "/slow").await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        stop.notify_one();
        tokio::time::sleep(Duration::from_secs(1)).await;
        release.notify_one();
        assert!(answer.await.unwrap().ends_with("late"));
        tokio::time::timeout(GRACE * 2, server)
            .await
            .unwrap()
            .unwrap();
    }
}
