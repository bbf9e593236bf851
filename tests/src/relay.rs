//! A TCP relay: a port on one address forwarding every connection to a server on another. The
//! real node's Pods reach this machine only at the node's address, while some test servers
//! (`../shared/llama`'s model server, for one) listen on loopback only.

use std::net::SocketAddr;

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running relay; dropping it stops accepting (connections in flight end with their peers).
#[derive(Debug)]
pub struct Relay {
    address: SocketAddr,
    task: JoinHandle<()>,
}

impl Relay {
    /// Listens on `listen` (port 0: a free one) and forwards each connection to `target`.
    pub async fn start(listen: SocketAddr, target: SocketAddr) -> anyhow::Result<Relay> {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding the relay to {listen}"))?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Ok(Relay { address, task })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_go_both_ways() -> anyhow::Result<()> {
        let server = TcpListener::bind("127.0.0.1:0").await?;
        let target = server.local_addr()?;
        tokio::spawn(async move {
            if let Ok((mut socket, _)) = server.accept().await {
                let mut buffer = [0u8; 4];
                if socket.read_exact(&mut buffer).await.is_ok() {
                    let _ = socket
                        .write_all(&buffer.map(|b| b.to_ascii_uppercase()))
                        .await;
                }
            }
        });
        let relay = Relay::start("127.0.0.1:0".parse()?, target).await?;
        let mut client = TcpStream::connect(relay.address()).await?;
        client.write_all(b"ping").await?;
        let mut answer = [0u8; 4];
        client.read_exact(&mut answer).await?;
        assert_eq!(&answer, b"PING");
        Ok(())
    }
}
