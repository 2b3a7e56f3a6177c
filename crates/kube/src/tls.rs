//! The one rustls `ClientConfig` every connection to the API server uses (unary calls through
//! ureq and the non-blocking watch streams alike).
//!
//! Only the `ring` provider (one crypto library in the binary), only the CA the settings name (a
//! cluster CA is private: system roots would only widen who can impersonate the server), and no
//! ALPN (offering `h2` makes the API server answer in HTTP/2, which neither ureq nor our watch
//! parser speaks). Everything that can be wrong with the PEM material is found here, at start-up:
//! ureq would panic inside a call on a certificate/key mismatch.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How the server's certificate is checked.
#[derive(Debug)]
pub(crate) enum ServerVerification {
    /// Against these CA certificates only.
    CaCertificates(Vec<CertificateDer<'static>>),
    /// Not at all (`insecure-skip-tls-verify`): anyone on the path can impersonate the server.
    /// Handshake signatures are still checked, so the connection is at least to the holder of
    /// the presented certificate's key.
    InsecureSkipVerify,
}

/// A client certificate chain (leaf first) and its private key.
#[derive(Debug)]
pub(crate) struct ClientIdentity {
    pub(crate) chain: Vec<CertificateDer<'static>>,
    pub(crate) key: PrivateKeyDer<'static>,
}

/// Which piece of TLS material is at fault, so the caller can name the right field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TlsConfigError {
    CertificateAuthority(String),
    ClientCertificate(String),
    ClientKey(String),
}

/// Every `CERTIFICATE` block of a PEM file, in order. Other blocks are skipped.
pub(crate) fn parse_certificates(pem_bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut certs = Vec::new();
    for item in CertificateDer::pem_slice_iter(pem_bytes) {
        certs.push(item.map_err(|e| pem_error(&e))?);
    }
    if certs.is_empty() {
        return Err("no PEM CERTIFICATE block found".to_string());
    }
    Ok(certs)
}

/// The first private key of a PEM file: PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`, as
/// kubeadm writes) or SEC1 (`EC PRIVATE KEY`, possibly after an `EC PARAMETERS` block).
pub(crate) fn parse_private_key(pem_bytes: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem_bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => {
            "no PEM private key block found (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)"
                .to_string()
        }
        other => pem_error(&other),
    })
}

fn pem_error(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "malformed PEM: missing end marker {:?}",
            String::from_utf8_lossy(end_marker)
        ),
        pem::Error::IllegalSectionStart { line } => format!(
            "malformed PEM: illegal section start {:?}",
            String::from_utf8_lossy(line)
        ),
        pem::Error::Base64Decode(m) => format!("malformed PEM: bad base64: {m}"),
        pem::Error::NoItemsFound => "no PEM block found".to_string(),
        other => format!("malformed PEM: {other:?}"),
    }
}

/// The crypto provider of every TLS connection we make.
pub(crate) fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the client configuration, checking the CA certificates parse and the client key
/// matches the client certificate (rustls 0.23 compares the key's public key with the
/// certificate's SubjectPublicKeyInfo in `with_client_auth_cert`; a test keeps that honest).
pub(crate) fn client_config(
    server: ServerVerification,
    identity: Option<ClientIdentity>,
) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let provider = crypto_provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsConfigError::CertificateAuthority(format!("TLS versions: {e}")))?;
    let builder = match server {
        ServerVerification::CaCertificates(cas) => {
            if cas.is_empty() {
                return Err(TlsConfigError::CertificateAuthority(
                    "no CA certificate".to_string(),
                ));
            }
            let mut roots = RootCertStore::empty();
            for (i, ca) in cas.into_iter().enumerate() {
                roots.add(ca).map_err(|e| {
                    TlsConfigError::CertificateAuthority(format!(
                        "certificate {} is not a usable CA certificate: {e}",
                        i + 1
                    ))
                })?;
            }
            builder.with_root_certificates(roots)
        }
        ServerVerification::InsecureSkipVerify => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCertificate { provider })),
    };
    let config =
        match identity {
            None => builder.with_no_client_auth(),
            Some(ClientIdentity { chain, key }) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| match e {
                    rustls::Error::InconsistentKeys(_) => TlsConfigError::ClientKey(
                        "does not match the client certificate (different public key)".to_string(),
                    ),
                    rustls::Error::InvalidCertificate(_)
                    | rustls::Error::NoCertificatesPresented => {
                        TlsConfigError::ClientCertificate(format!("unusable certificate: {e}"))
                    }
                    other => TlsConfigError::ClientKey(format!("unusable private key: {other}")),
                })?,
        };
    // No ALPN on purpose (see the module comment); rustls' default is already empty.
    debug_assert!(config.alpn_protocols.is_empty());
    Ok(Arc::new(config))
}

/// The name the server's certificate must carry: an IP literal is checked against IP SANs
/// (`https://127.0.0.1:6443`), anything else against DNS SANs.
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string())
        .map_err(|_| format!("{host:?} is not a valid TLS server name"))
}

/// `insecure-skip-tls-verify`: any certificate is accepted, the handshake signature is still
/// verified with the provider's algorithms.
#[derive(Debug)]
struct AcceptAnyServerCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_pem_is_an_error_not_a_panic() {
        assert!(parse_certificates(b"").is_err());
        assert!(parse_certificates(b"hello").is_err());
        let truncated = b"-----BEGIN CERTIFICATE-----\nMIIB\n";
        assert!(parse_certificates(truncated).is_err());
        assert!(
            parse_private_key(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
                .is_err()
        );
    }

    #[test]
    fn a_ca_that_is_not_a_certificate_is_blamed_on_the_ca() {
        let not_der = CertificateDer::from(vec![1u8, 2, 3]);
        let err =
            client_config(ServerVerification::CaCertificates(vec![not_der]), None).unwrap_err();
        assert!(
            matches!(err, TlsConfigError::CertificateAuthority(_)),
            "{err:?}"
        );
    }

    #[test]
    fn ip_literals_become_ip_server_names() {
        assert!(matches!(
            server_name("127.0.0.1"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(server_name("::1"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(
            server_name("kubernetes.default.svc"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(server_name("bad name!").is_err());
    }
}
