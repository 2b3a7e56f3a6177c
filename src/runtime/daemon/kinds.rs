//! What the daemon's loop sources and timers are, and the three watched kinds. Types only: owns
//! no state.

use crate::runtime::signals::Signal;

/// The three watched kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Watch {
    Nodes,
    Leases,
    Pods,
}

impl Watch {
    pub(crate) const ALL: [Watch; 3] = [Watch::Nodes, Watch::Leases, Watch::Pods];

    pub(crate) fn resource(self) -> &'static str {
        match self {
            Watch::Nodes => "nodes",
            Watch::Leases => "leases",
            Watch::Pods => "pods",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// What a registered loop source is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SourceKind {
    Signal(Signal),
    /// An informer's watch socket.
    Watch(Watch),
    /// The metrics listener and its connections.
    Metrics,
    /// The control socket and its clients (`status`, `explain`).
    Control,
    /// A fence command's stdout or stderr.
    FenceOutput,
}

/// What a loop timer is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TimerKind {
    /// Send `WATCHDOG=1`: armed only while the loop turns, so a stuck loop goes silent.
    Watchdog,
    /// An informer's next LIST page, watch (re)open, idle check or read budget.
    Informer(Watch),
    /// `Controllers::next_deadline`: feed `Input::Tick`.
    Controller,
    /// `Executor::next_wakeup`: run queued API calls.
    Executor,
    /// `LeaderElection::next_deadline`: renew, retry, or notice the renew deadline.
    Leader,
    /// The metrics server's heartbeat and connection deadlines.
    Metrics,
    /// The control socket's client deadlines.
    Control,
    /// The decision log's folded lines are due to be summarised.
    Decisions,
    /// The earliest fence command timeout.
    Fence,
}
