//! TLS serving with rustls (ring provider) from PEM passed in: a server certificate chain and
//! key, and optionally a client CA whose certificates identify callers (the CN goes to the write
//! log; clients without a certificate are still accepted).

use std::io;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// PEM material for `SimConfig::tls`.
#[derive(Clone, Debug)]
pub struct SimTls {
    /// Server certificate first, then intermediates.
    pub cert_chain_pem: String,
    pub private_key_pem: String,
    /// When set, clients may present certificates signed by this CA; their CN identifies them.
    pub client_ca_pem: Option<String>,
}

fn invalid(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("simulator TLS: {what}: {e}"),
    )
}

pub(crate) fn server_config(tls: &SimTls) -> io::Result<Arc<rustls::ServerConfig>> {
    let certs = CertificateDer::pem_slice_iter(tls.cert_chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid("server certificate PEM", e))?;
    if certs.is_empty() {
        return Err(invalid("server certificate PEM", "no CERTIFICATE block"));
    }
    let key = PrivateKeyDer::from_pem_slice(tls.private_key_pem.as_bytes())
        .map_err(|e| invalid("server key PEM", e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("protocol versions", e))?;
    let builder = match &tls.client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots
                    .add(cert.map_err(|e| invalid("client CA PEM", e))?)
                    .map_err(|e| invalid("client CA certificate", e))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| invalid("client verifier", e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| invalid("certificate and key", e))?;
    // HTTP/1.1 only, as the daemon's watch connections expect (no h2 upgrade).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// One DER TLV: (tag, contents, rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)? as usize;
    let (len, header) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *input.get(2 + i)? as usize;
        }
        (len, 2 + n)
    };
    let end = header.checked_add(len)?;
    (end <= input.len()).then(|| (tag, &input[header..end], &input[end..]))
}

/// The subject's commonName (OID 2.5.4.3) of a DER certificate; `None` if absent or malformed.
pub(crate) fn subject_common_name(der: &[u8]) -> Option<String> {
    const CN_OID: &[u8] = &[0x55, 0x04, 0x03];
    let (_, certificate, _) = tlv(der)?;
    let (_, tbs, _) = tlv(certificate)?;
    let mut rest = tbs;
    let (tag, _, after) = tlv(rest)?;
    if tag == 0xA0 {
        rest = after; // explicit version
    }
    // serialNumber, signature, issuer, validity
    for _ in 0..4 {
        rest = tlv(rest)?.2;
    }
    let (_, mut subject, _) = tlv(rest)?;
    while !subject.is_empty() {
        let (_, mut rdn, next) = tlv(subject)?;
        subject = next;
        while !rdn.is_empty() {
            let (_, attribute, next) = tlv(rdn)?;
            rdn = next;
            let (oid_tag, oid, value) = tlv(attribute)?;
            if oid_tag == 0x06 && oid == CN_OID {
                let (_, text, _) = tlv(value)?;
                return Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    None
}
