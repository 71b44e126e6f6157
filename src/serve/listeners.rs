//! Binding the built-in server's listeners, each failure named by the flag
//! that asked for the listener, its address and the reason; and the Unix
//! socket's file, which is replaced only when stale and removed at the end.

use std::fmt::Display;
use std::io;
use std::net::SocketAddr;

use super::ServeConfig;

/// Every listener the server was asked for, bound and non-blocking.
pub struct Bound {
    pub main: std::net::TcpListener,
    pub tcp: Option<std::net::TcpListener>,
    pub ws: Option<std::net::TcpListener>,
    #[cfg(unix)]
    pub unix: Option<std::os::unix::net::UnixListener>,
    /// The Unix listener's file, for whoever must remove it at the end.
    #[cfg(unix)]
    pub socket_file: Option<SocketFile>,
}

impl Bound {
    /// Binds them all, or none: a listener bound before a later one fails
    /// is closed again (and a socket file made for it removed) on return.
    pub fn bind(config: &ServeConfig) -> io::Result<Bound> {
        let main = bind_tcp("--listen", config.listen)?;
        let tcp = config.tcp.map(|addr| bind_tcp("--tcp", addr)).transpose()?;
        let ws = config.ws.map(|addr| bind_tcp("--ws", addr)).transpose()?;
        #[cfg(unix)]
        let (unix, socket_file) = config.unix.as_deref().map(SocketFile::bind).transpose()?.unzip();
        Ok(Bound {
            main,
            tcp,
            ws,
            #[cfg(unix)]
            unix,
            #[cfg(unix)]
            socket_file,
        })
    }
}

/// An error that says which listener failed: `--tcp 127.0.0.1:8546:
/// cannot listen: Address already in use`, so that the one of several
/// listeners at fault is plain.
fn cannot_listen(flag: &str, at: impl Display, why: impl Display, kind: io::ErrorKind) -> io::Error {
    io::Error::new(kind, format!("{flag} {at}: cannot listen: {why}"))
}

fn bind_tcp(flag: &str, addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let failed = |e: io::Error| cannot_listen(flag, addr, &e, e.kind());
    let listener = std::net::TcpListener::bind(addr).map_err(failed)?;
    listener.set_nonblocking(true).map_err(failed)?;
    raise_backlog(&listener);
    Ok(listener)
}

/// Connections a listener queues before it accepts them.
const BACKLOG: libc::c_int = 4096;

/// std listens with a backlog of 128: thousands of clients connecting at
/// once then wait out a SYN retransmit (a second) for a place in the queue.
/// Listening again raises it (the kernel caps it at `somaxconn`); should it
/// fail, the listener keeps the backlog it had.
fn raise_backlog(listener: &std::net::TcpListener) {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: listen(2) on a socket this listener owns, already listening.
        let _ = unsafe { libc::listen(listener.as_raw_fd(), BACKLOG) };
    }
    #[cfg(not(unix))]
    let _ = (listener, BACKLOG);
}

#[cfg(unix)]
pub use unix::SocketFile;

#[cfg(unix)]
mod unix {
    use std::io;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::{Path, PathBuf};

    use super::cannot_listen;

    /// The socket file this server made; dropping it removes the file,
    /// unless something else has taken its place since.
    pub struct SocketFile {
        path: PathBuf,
        /// Device and inode, to know the file is still ours.
        id: (u64, u64),
    }

    impl SocketFile {
        /// Binds `path`, first removing a stale socket there (one nobody
        /// listens on, left by a server that was killed). Anything else
        /// at `path` (a live socket, a file, a directory, a link) is
        /// refused: it may be another program's, or someone's data.
        pub fn bind(path: &Path) -> io::Result<(UnixListener, SocketFile)> {
            let failed = |e: io::Error| cannot_listen("--unix", path.display(), &e, e.kind());
            clear_stale(path)?;
            let listener = UnixListener::bind(path).map_err(|e| explain_bind(path, e))?;
            listener.set_nonblocking(true).map_err(failed)?;
            let meta = std::fs::symlink_metadata(path).map_err(failed)?;
            let file = SocketFile {
                path: path.to_path_buf(),
                id: (meta.dev(), meta.ino()),
            };
            Ok((listener, file))
        }
    }

    impl Drop for SocketFile {
        fn drop(&mut self) {
            let ours = std::fs::symlink_metadata(&self.path)
                .is_ok_and(|m| m.file_type().is_socket() && (m.dev(), m.ino()) == self.id);
            if ours {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }

    /// Removes a socket at `path` that refuses connections; refuses
    /// anything else that is there.
    fn clear_stale(path: &Path) -> io::Result<()> {
        let refuse = |why: &str| cannot_listen("--unix", path.display(), why, io::ErrorKind::AlreadyExists);
        let failed = |e: io::Error| cannot_listen("--unix", path.display(), &e, e.kind());
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(failed(e)),
        };
        let kind = meta.file_type();
        if !kind.is_socket() {
            let what = if kind.is_dir() {
                "a directory"
            } else if kind.is_symlink() {
                "a symbolic link"
            } else if kind.is_file() {
                "a regular file"
            } else {
                "a special file"
            };
            return Err(refuse(&format!(
                "{what} is there, not a socket (volley replaces only a stale socket); give another path or move it away"
            )));
        }
        match UnixStream::connect(path) {
            Ok(_) => Err(refuse(
                "a server is already listening on this socket; stop it or give another path",
            )),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path).map_err(failed)
            }
            Err(e) => Err(failed(e)),
        }
    }

    /// A missing directory is the common reason a bind is not found.
    fn explain_bind(path: &Path, e: io::Error) -> io::Error {
        let missing = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty() && !dir.exists());
        match (e.kind(), missing) {
            (io::ErrorKind::NotFound, Some(dir)) => cannot_listen(
                "--unix",
                path.display(),
                format!("its directory {} does not exist", dir.display()),
                e.kind(),
            ),
            _ => cannot_listen("--unix", path.display(), &e, e.kind()),
        }
    }
}
