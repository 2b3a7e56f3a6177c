//! TCP keepalive on the watch sockets: `setsockopt` through libc (already in the tree through mio),
//! so the option names and their values come from the platform's headers, not from us.

use std::io;
use std::time::Duration;

#[cfg(target_os = "linux")]
pub(crate) fn enable(socket: &mio::net::TcpStream, idle: Duration) -> io::Result<()> {
    use libc::{IPPROTO_TCP, SO_KEEPALIVE, SOL_SOCKET, TCP_KEEPCNT, TCP_KEEPIDLE, TCP_KEEPINTVL};
    use libc::{c_int, c_void, socklen_t};
    use std::os::fd::AsRawFd;

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
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const c_int).cast::<c_void>(),
                std::mem::size_of::<c_int>() as socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn enable(_socket: &mio::net::TcpStream, _idle: Duration) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "keepalive is set on Linux only",
    ))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn option(socket: &mio::net::TcpStream, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: an open socket, and a pointer and length describing a live c_int.
        let rc = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                level,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        value
    }

    #[test]
    fn a_watch_socket_probes_after_the_idle_time_then_every_5_s_three_times() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let socket = mio::net::TcpStream::from_std(stream);
        enable(&socket, Duration::from_secs(45)).unwrap();
        assert_eq!(option(&socket, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(option(&socket, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 45);
        assert_eq!(option(&socket, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 5);
        assert_eq!(option(&socket, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 3);
    }
}
