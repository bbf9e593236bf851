//! Runs one probe of a running container on its period and reports what changed (see
//! [`super::probe_plan`]): an exec in the container, a TCP connection, or an HTTP GET.

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::lifecycle::ProbeResult;
use super::probe_plan::{Check, Counter, ProbePlan};
use super::runtime::container::{ExecOutcome, exec};

/// The running container a probe looks at.
#[derive(Debug, Clone)]
pub struct Target {
    /// This binary, which runs the exec.
    pub exe: PathBuf,
    /// The container's entry process.
    pub entry: u32,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its environment.
    pub env: Vec<(String, String)>,
}

/// Runs `plan` against `target` until the probe has nothing more to say; `report` gets each
/// change. The first failure of a streak is logged with why, under `label`. Abort the task to
/// stop it.
pub async fn run(plan: ProbePlan, target: Target, label: String, report: impl Fn(ProbeResult)) {
    tokio::time::sleep(plan.initial_delay).await;
    let mut counter = Counter::new(&plan);
    let mut failing = false;
    loop {
        let outcome = check(&plan.check, &target, plan.timeout).await;
        if let Err(why) = &outcome
            && !failing
        {
            tracing::info!("{label}: {:?} probe failed: {why}", plan.kind);
        }
        failing = outcome.is_err();
        if let Some(result) = counter.observe(outcome.is_ok()) {
            report(result);
        }
        if counter.done() {
            return;
        }
        tokio::time::sleep(plan.period).await;
    }
}

/// Runs the check once; `Err` says why it failed.
async fn check(check: &Check, target: &Target, timeout: Duration) -> Result<(), String> {
    match check {
        Check::Exec(argv) => match exec(
            &target.exe,
            target.entry,
            &target.cwd,
            &target.env,
            argv,
            timeout,
        )
        .await
        {
            ExecOutcome::Exited(0, _) => Ok(()),
            ExecOutcome::Exited(code, output) => {
                let output: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
                Err(format!("exit code {code}: {}", output.join(" / ")))
            }
            ExecOutcome::TimedOut => Err(format!("timed out after {timeout:?}")),
            ExecOutcome::CannotRun(why) => Err(why),
        },
        Check::Tcp { host, port } => {
            match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), *port))).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(error)) => Err(format!("connecting to {host}:{port}: {error}")),
                Err(_) => Err(format!("connecting to {host}:{port} timed out")),
            }
        }
        Check::Http {
            host,
            port,
            path,
            headers,
        } => match tokio::time::timeout(timeout, http_get(host, *port, path, headers)).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("GET http://{host}:{port}{path} failed")),
            Err(_) => Err(format!("GET http://{host}:{port}{path} timed out")),
        },
        Check::Unsupported(why) => Err(why.clone()),
    }
}

async fn http_get(host: &str, port: u16, path: &str, headers: &[(String, String)]) -> bool {
    let Ok(mut stream) = TcpStream::connect((host, port)).await else {
        return false;
    };
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.32\r\n\
         Accept: */*\r\nConnection: close\r\n"
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
        if head[..read].contains(&b'\n') {
            break;
        }
    }
    status_ok(&String::from_utf8_lossy(&head[..read]))
}

/// Whether an HTTP answer starting with `head` counts as a success (200 to 399).
fn status_ok(head: &str) -> bool {
    let mut words = head.split_whitespace();
    let version = words.next().unwrap_or_default();
    let code = words.next().and_then(|c| c.parse::<u16>().ok());
    version.starts_with("HTTP/") && code.is_some_and(|c| (200..400).contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_successes_are_200_to_399() {
        assert!(status_ok("HTTP/1.1 200 OK\r\n"));
        assert!(status_ok("HTTP/1.0 302 Found\r\n"));
        assert!(!status_ok("HTTP/1.1 404 Not Found\r\n"));
        assert!(!status_ok("HTTP/1.1 500\r\n"));
        assert!(!status_ok("garbage"));
        assert!(!status_ok(""));
    }

    #[tokio::test]
    async fn network_probes_reach_real_listeners() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            for answer in [
                "HTTP/1.1 204 No Content\r\n\r\n",
                "HTTP/1.1 503 Busy\r\n\r\n",
            ] {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut request = vec![0u8; 1024];
                let n = socket.read(&mut request).await.unwrap();
                assert!(String::from_utf8_lossy(&request[..n]).contains("X-Check: yes"));
                socket.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        let target = Target {
            exe: PathBuf::from("/nonexistent"),
            entry: 0,
            cwd: PathBuf::from("/"),
            env: Vec::new(),
        };
        let http = Check::Http {
            host: "127.0.0.1".into(),
            port,
            path: "/ready".into(),
            headers: vec![("X-Check".into(), "yes".into())],
        };
        let timeout = Duration::from_secs(5);
        assert_eq!(check(&http, &target, timeout).await, Ok(()), "204");
        assert!(check(&http, &target, timeout).await.is_err(), "503");
        server.await.unwrap();
        let closed = Check::Tcp {
            host: "127.0.0.1".into(),
            port,
        };
        assert!(
            check(&closed, &target, timeout).await.is_err(),
            "nothing listens now"
        );
        assert_eq!(
            check(&Check::Unsupported("grpc".into()), &target, timeout).await,
            Err("grpc".to_owned())
        );
    }
}
