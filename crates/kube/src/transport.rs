//! The ureq `Agent` for one `Connection`: TCP from ureq, TLS from *our* rustls `ClientConfig`.
//!
//! ureq's own rustls connector builds a second `ClientConfig` from its `TlsConfig` and `expect`s
//! the client certificate to fit its key (a panic inside `.call()`). A small connector that wraps
//! the TCP transport with the `Arc<ClientConfig>` of the `Connection` instead means there is one
//! TLS configuration for unary calls and watch streams, checked once at start-up, no panic path,
//! and the insecure mode is ours, not a second implementation of it. The connector API is ureq's
//! `unversioned` transport module: pinned by Cargo.lock, revisit on a ureq upgrade.

use std::fmt;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use rustls::{ClientConfig, ClientConnection, StreamOwned};
use ureq::unversioned::transport::time::{Duration as UreqDuration, Instant as UreqInstant};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, TcpConnector,
    Transport, TransportAdapter,
};

use super::connection::{Connection, Scheme};
use super::resolve::ApiServerResolver;
use super::tls;

/// Sent with every request, as client-go sends `<binary>/<version> (…)`.
pub(crate) const USER_AGENT: &str = concat!("node-lifecycled/", env!("CARGO_PKG_VERSION"));

/// One keep-alive `Agent` for all unary calls to `connection`.
pub(crate) fn agent(connection: &Connection, timeout: Duration) -> ureq::Agent {
    let config = ureq::config::Config::builder()
        // Non-2xx answers carry a metav1.Status body that types the error: keep them.
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .user_agent(USER_AGENT)
        .accept("application/json")
        // The API server never redirects a client we talk to; following one could carry the
        // bearer token elsewhere. Proxies from the environment are not honoured (documented).
        .max_redirects(0)
        .proxy(None)
        .https_only(connection.scheme == Scheme::Https)
        .build();
    let connector = ().chain(TcpConnector::default()).chain(ConnectionTls {
        config: connection.tls.clone(),
    });
    ureq::Agent::with_parts(config, connector, ApiServerResolver::default())
}

/// Wraps the TCP transport in TLS with the connection's rustls configuration.
struct ConnectionTls {
    config: Option<Arc<ClientConfig>>,
}

impl fmt::Debug for ConnectionTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionTls")
            .field("configured", &self.config.is_some())
            .finish()
    }
}

impl<In: Transport> Connector<In> for ConnectionTls {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Ok(None);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let Some(config) = &self.config else {
            return Err(ureq::Error::Tls("https:// without a TLS configuration"));
        };
        let host = details
            .uri
            .host()
            .ok_or(ureq::Error::Tls("request URL without a host"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name =
            tls::server_name(host).map_err(|_| ureq::Error::Tls("invalid TLS server name"))?;

        let mut conn = ClientConnection::new(config.clone(), name)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(remaining(details));
        conn.complete_io(&mut sock).map_err(unwrap_rustls_error)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(TlsTransport {
            buffers,
            stream: StreamOwned { conn, sock },
        })))
    }
}

/// The connect budget left after the TCP connect, so the handshake cannot stretch the hard
/// timeout (ureq's own connector does the same through a crate-private setter).
fn remaining(details: &ConnectionDetails) -> NextTimeout {
    let mut timeout = details.timeout;
    if let (UreqDuration::Exact(limit), UreqInstant::Exact(started), UreqInstant::Exact(now)) =
        (timeout.after, details.now, (details.current_time)())
    {
        let elapsed = now.saturating_duration_since(started);
        timeout.after = UreqDuration::Exact(limit.saturating_sub(elapsed));
    }
    timeout
}

/// rustls reports handshake failures (unknown issuer, name mismatch, bad client certificate)
/// as `io::Error`s wrapping a `rustls::Error`; surface the rustls error itself.
fn unwrap_rustls_error(e: std::io::Error) -> ureq::Error {
    if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        if let Some(inner) = e.into_inner() {
            if let Ok(rustls_error) = inner.downcast::<rustls::Error>() {
                return ureq::Error::Rustls(*rustls_error);
            }
        }
        return ureq::Error::Tls("TLS handshake failed");
    }
    ureq::Error::from(e)
}

pub(crate) struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsTransport").finish()
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}
