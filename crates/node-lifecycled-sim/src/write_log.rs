//! The server's record of every mutating request: who (token, user agent, client certificate CN),
//! when (time since start and wall time), what (verb, resource, object, result, a summary of the
//! change). End-to-end tests assert on it; the `run` timeline prints it.

use std::fmt;
use std::time::Duration;

use super::resource::{Resource, Verb};
use node_lifecycled::time::Time;

/// Who made a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The `Authorization: Bearer` token.
    pub token: Option<String>,
    pub user_agent: Option<String>,
    /// Common name of the TLS client certificate, when one was presented.
    pub client_cn: Option<String>,
}

impl Identity {
    /// Writes made in-process through `Cluster` (tests, simulated kubelets).
    pub fn direct(label: &str) -> Identity {
        Identity {
            token: None,
            user_agent: Some(label.to_string()),
            client_cn: None,
        }
    }

    /// The shortest name that tells writers apart: the certificate CN, else the token, else the
    /// user agent.
    pub fn label(&self) -> &str {
        self.client_cn
            .as_deref()
            .or(self.token.as_deref())
            .or(self.user_agent.as_deref())
            .unwrap_or("anonymous")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    /// Position in the log, from 1.
    pub seq: u64,
    /// Time since the server started.
    pub elapsed: Duration,
    /// Wall-clock time of the write.
    pub wall: Time,
    pub identity: Identity,
    pub verb: Verb,
    pub resource: Resource,
    /// `Some("status")` for writes to the status subresource.
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: String,
    /// HTTP status code answered.
    pub code: u16,
    /// resourceVersion of the object after a successful write.
    pub resource_version: Option<u64>,
    /// The change: the patch body, the diff of a PUT, the event's reason and message, the delete
    /// options, or the error message of a failed write.
    pub summary: String,
}

impl WriteRecord {
    /// `resource` or `resource/subresource`, as RBAC and the fault rules name it.
    pub fn target(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.to_string(),
        }
    }

    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }

    pub fn is(&self, verb: Verb, target: &str) -> bool {
        self.verb == verb && self.target() == target
    }

    pub fn by(&self, who: &str) -> bool {
        self.identity.label() == who
    }
}

impl fmt::Display for WriteRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let object = match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        };
        write!(
            f,
            "{:>9.3}s {} {} {} {} {} {}",
            self.elapsed.as_secs_f64(),
            self.identity.label(),
            self.verb,
            self.target(),
            object,
            self.code,
            self.summary
        )
    }
}

/// Bounded in memory: the oldest records go first once `capacity` is reached (a benchmark of
/// 150,000 evictions still fits the default).
#[derive(Debug)]
pub(crate) struct WriteLog {
    records: std::collections::VecDeque<WriteRecord>,
    capacity: usize,
    next_seq: u64,
}

impl WriteLog {
    pub fn new(capacity: usize) -> WriteLog {
        WriteLog {
            records: Default::default(),
            capacity: capacity.max(1),
            next_seq: 1,
        }
    }

    pub fn push(&mut self, mut record: WriteRecord) {
        record.seq = self.next_seq;
        self.next_seq += 1;
        if self.records.len() == self.capacity {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    pub fn snapshot(&self) -> Vec<WriteRecord> {
        self.records.iter().cloned().collect()
    }

    /// The records after `seq`, oldest first (a reader following the log as it grows).
    pub fn after(&self, seq: u64) -> Vec<WriteRecord> {
        let first = self.records.partition_point(|r| r.seq <= seq);
        self.records.range(first..).cloned().collect()
    }

    pub fn clear(&mut self) {
        self.records.clear();
    }
}
