//! The HTTPS listener: the rustls certificate resolver that renewal swaps without closing the listener, the
//! server config (ring provider), and the accept loop serving the axum router over HTTP/1.1 with keep-alive.

use super::certificate::*;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::sync::{Arc, RwLock};
#[cfg(not(madsim))]
use std::time::Duration;

/// The certificate the listener serves; swapped in place on renewal, so open listeners and connections stay.
#[derive(Debug)]
pub struct SwappableCert {
    current: RwLock<(Arc<CertifiedKey>, Option<jiff::Timestamp>)>,
}

/// The earliest expiry in the bundle's chain.
fn expiry(bundle: &CertBundle) -> Option<jiff::Timestamp> {
    bundle.facts.iter().map(|f| f.not_after).min()
}

impl SwappableCert {
    pub fn new(bundle: &CertBundle) -> Result<Arc<Self>, TlsError> {
        let key = certified_key(&bundle.cert_pem, &bundle.key_pem)
            .map_err(|reason| TlsError::Invalid { what: "the serving certificate".into(), reason })?;
        Ok(Arc::new(SwappableCert { current: RwLock::new((Arc::new(key), expiry(bundle))) }))
    }

    pub fn swap(&self, bundle: &CertBundle) -> Result<(), TlsError> {
        let key = certified_key(&bundle.cert_pem, &bundle.key_pem)
            .map_err(|reason| TlsError::Invalid { what: "the renewed certificate".into(), reason })?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = (Arc::new(key), expiry(bundle));
        Ok(())
    }

    /// The chain served now, leaf first.
    pub fn served_chain(&self) -> Vec<rustls::pki_types::CertificateDer<'static>> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).0.cert.clone()
    }

    /// When the served certificate (or the earliest of its chain) expires.
    pub fn not_after(&self) -> Option<jiff::Timestamp> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).1
    }
}

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(|e| e.into_inner()).0.clone())
    }
}

/// The rustls server configuration over a swappable certificate (HTTP/1.1, ring provider).
pub fn server_config(cert: Arc<SwappableCert>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Settings)?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS on `listener` until the task is dropped: each connection gets a TLS handshake
/// (bounded by `request_timeout`) and HTTP/1.1 with keep-alive. A failing connection never stops the listener.
#[cfg(not(madsim))]
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: axum::Router,
    request_timeout: Duration,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "accepting a TLS connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(request_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(err)) => {
                    tracing::debug!(%peer, error = %err, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(request_timeout).keep_alive(true);
            if let Err(err) = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service).await {
                tracing::debug!(%peer, error = %err, "webhook connection ended with an error");
            }
        });
    }
}
