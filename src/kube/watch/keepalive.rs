//! TCP keepalive without a socket crate: `setsockopt` from the C library std already links.

use std::io;
use std::time::Duration;

#[cfg(target_os = "linux")]
pub fn enable(socket: &mio::net::TcpStream, idle: Duration) -> io::Result<()> {
    use std::ffi::{c_int, c_void};
    use std::os::fd::AsRawFd;

    unsafe extern "C" {
        fn setsockopt(
            fd: c_int,
            level: c_int,
            name: c_int,
            value: *const c_void,
            len: u32,
        ) -> c_int;
    }
    // <sys/socket.h>, <netinet/in.h>, <netinet/tcp.h> on Linux.
    const SOL_SOCKET: c_int = 1;
    const SO_KEEPALIVE: c_int = 9;
    const IPPROTO_TCP: c_int = 6;
    const TCP_KEEPIDLE: c_int = 4;
    const TCP_KEEPINTVL: c_int = 5;
    const TCP_KEEPCNT: c_int = 6;

    let fd = socket.as_raw_fd();
    let idle_secs = c_int::try_from(idle.as_secs().max(1)).unwrap_or(c_int::MAX);
    for (level, name, value) in [
        (SOL_SOCKET, SO_KEEPALIVE, 1),
        (IPPROTO_TCP, TCP_KEEPIDLE, idle_secs),
        (IPPROTO_TCP, TCP_KEEPINTVL, 5),
        (IPPROTO_TCP, TCP_KEEPCNT, 3),
    ] {
        // SAFETY: `fd` is an open socket owned by `socket`, which outlives the call; the
        // value pointer and length describe a live c_int, as setsockopt(2) expects.
        let rc = unsafe {
            setsockopt(
                fd,
                level,
                name,
                (&value as *const c_int).cast::<c_void>(),
                std::mem::size_of::<c_int>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn enable(_socket: &mio::net::TcpStream, _idle: Duration) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "keepalive is set on Linux only",
    ))
}
