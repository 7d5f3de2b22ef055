//! A real browser for the web view's tests: Debian's headless Chromium driven through
//! chromedriver (WebDriver), as a person's browser would load the page.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// A headless Chromium session; chromedriver and the browser end with it.
pub struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and a headless Chromium of laptop size.
    pub fn start() -> Browser {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver; make test installs it)");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1366,900",
                         "--lang=en-US", "--force-device-scale-factor=1"],
            }),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let connected = runtime.block_on(
                ClientBuilder::new(HttpConnector::new())
                    .capabilities(caps.clone())
                    .connect(&format!("http://127.0.0.1:{port}")),
            );
            match connected {
                Ok(client) => break client,
                Err(e) if Instant::now() > deadline => panic!("no WebDriver session: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        Browser {
            runtime,
            client: Some(client),
            driver,
        }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("a session")
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        self.runtime
            .block_on(self.client().goto(url))
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// What `script` (a function body) returns, run in the page.
    pub fn js(&self, script: &str) -> Value {
        self.runtime
            .block_on(self.client().execute(script, Vec::new()))
            .unwrap_or_else(|e| panic!("run {script}: {e}"))
    }

    /// Waits until `script` returns something other than `null` or `false`, and returns it.
    pub fn wait_for(&self, what: &str, script: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.js(script);
            if !value.is_null() && value != Value::Bool(false) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the page shows:\n{}",
                self.js("return document.body.innerText")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Clicks the first element `css` selects.
    pub fn click(&self, css: &str) {
        self.runtime.block_on(async {
            let element = self
                .client()
                .find(fantoccini::Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("find {css}: {e}"));
            element
                .click()
                .await
                .unwrap_or_else(|e| panic!("click {css}: {e}"));
        });
    }

    /// Saves what the window shows as a PNG at `path`.
    pub fn screenshot(&self, path: &Path) {
        let png = self
            .runtime
            .block_on(self.client().screenshot())
            .expect("a screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshots' directory");
        }
        std::fs::write(path, png).expect("write the screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
