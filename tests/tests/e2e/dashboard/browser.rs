//! A headless Chromium driven over WebDriver: Debian's `chromedriver` started on a free port
//! for one test, a fantoccini session on it, and the screenshots it writes for a reviewer.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use fantoccini::{Client, ClientBuilder, Locator};
use herd_e2e::external_tools::{CHROMEDRIVER, CHROMIUM};
use herd_e2e::wait::wait_for;
use serde_json::json;
use tokio::process::{Child, Command};

/// How long chromedriver may take to listen.
const DRIVER_START: Duration = Duration::from_secs(30);
/// How long an element may keep being replaced under a click or typing.
const ACT_TIME: Duration = Duration::from_secs(10);

/// A browser session and the driver serving it (killed when dropped).
pub struct Browser {
    pub client: Client,
    _driver: Child,
}

impl Browser {
    /// A new headless browser, or `None` (after a SKIPPED line) when chromedriver or chromium
    /// is missing outside CI.
    pub async fn start(test: &str) -> anyhow::Result<Option<Browser>> {
        let (Some(driver), Some(chromium)) = (CHROMEDRIVER.find(test)?, CHROMIUM.find(test)?)
        else {
            return Ok(None);
        };
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))?
            .local_addr()?
            .port();
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", driver.display()))?;
        wait_for("chromedriver to listen", DRIVER_START, || async move {
            Ok(tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(drop))
        })
        .await?;
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                // Root in a container has no user namespace sandbox; nothing else is loaded.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,860",
                         "--force-prefers-reduced-motion"],
            }
        });
        let capabilities = capabilities
            .as_object()
            .cloned()
            .context("capabilities are an object")?;
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .context("a WebDriver session on chromedriver")?;
        Ok(Some(Browser {
            client,
            _driver: child,
        }))
    }

    /// The text of the page's body.
    pub async fn text(&self) -> anyhow::Result<String> {
        Ok(self.client.find(Locator::Css("body")).await?.text().await?)
    }

    /// Waits until the body's text contains `wanted`; the text then.
    pub async fn until_text(&self, wanted: &str, timeout: Duration) -> anyhow::Result<String> {
        let what = format!("the page to show {wanted:?}");
        let found = wait_for(&what, timeout, || async {
            let text = self.text().await.unwrap_or_default();
            Ok(text.contains(wanted).then_some(text))
        })
        .await;
        match found {
            Ok(text) => Ok(text),
            Err(error) => Err(error.context(format!("the page said:\n{}", self.text().await?))),
        }
    }

    /// Clicks the element `css` finds. The page swaps a region's HTML as the Run changes, so an
    /// element found may be replaced before the click lands: it is then found again.
    pub async fn click(&self, css: &str) -> anyhow::Result<()> {
        wait_for(&format!("a click on {css}"), ACT_TIME, || async {
            let element = self.client.find(Locator::Css(css)).await?;
            match element.click().await {
                Ok(_) => Ok(Some(())),
                Err(error) if error.is_stale_element_reference() => Ok(None),
                Err(error) => Err(error.into()),
            }
        })
        .await
    }

    /// Types `text` into the field `css` finds, from empty; found again when replaced meanwhile
    /// (as for [`Browser::click`]).
    pub async fn type_into(&self, css: &str, text: &str) -> anyhow::Result<()> {
        wait_for(&format!("typing into {css}"), ACT_TIME, || async {
            let field = self.client.find(Locator::Css(css)).await?;
            let typed = async {
                field.clear().await?;
                field.send_keys(text).await
            };
            match typed.await {
                Ok(()) => Ok(Some(())),
                Err(error) if error.is_stale_element_reference() => Ok(None),
                Err(error) => Err(error.into()),
            }
        })
        .await
    }

    /// Writes a PNG of the window as `name.png` in the screenshots' folder; its path.
    pub async fn screenshot(&self, name: &str) -> anyhow::Result<PathBuf> {
        let dir = screenshots();
        std::fs::create_dir_all(&dir)?;
        let file = dir.join(format!("{name}.png"));
        std::fs::write(&file, self.client.screenshot().await?)?;
        Ok(file)
    }

    /// Ends the session.
    pub async fn close(self) -> anyhow::Result<()> {
        self.client.close().await?;
        Ok(())
    }
}

/// Where the tests write screenshots: `target/tmp/dashboard-screenshots` (not committed).
pub fn screenshots() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots")
}
