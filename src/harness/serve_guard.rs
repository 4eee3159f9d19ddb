//! The connection layer of `sim serve` (docs/serve.md, "Limits"): what a client on the socket
//! may do before the server model sees its request. The model's accept loop is the one the
//! simulation runs; these limits wrap the accepted streams instead, so simulated worlds never
//! meet them.
//!
//! - at most [`Limits::max_connections`] connections at once; one more is answered 503 and
//!   closed;
//! - a request's head and body must arrive within [`Limits::request_read`] of its first byte
//!   (a client that drips its request a byte at a time, slowloris, is cut off); the time a
//!   connection sits idle between requests, or reads a long streamed answer, does not count;
//! - a head over [`Limits::max_head`] bytes, or a body over [`Limits::max_body`] (by its
//!   `Content-Length` or its chunks), ends the request: the model sees its body end early and
//!   answers 413, and the connection closes.
//!
//! The limits are enforced on the bytes as they are read, by a small HTTP/1.1 framing tracker
//! (request line and headers up to the blank line, then `Content-Length` bytes or chunks).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a client of `sim serve` may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub request_read: Duration,
    pub max_head: usize,
    pub max_body: u64,
}

/// The limits `sim serve` runs with.
pub const LIMITS: Limits = Limits {
    max_connections: 64,
    request_read: Duration::from_secs(10),
    max_head: 64 << 10,
    max_body: 4 << 20,
};

/// The answer to a connection over [`Limits::max_connections`].
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 44\r\nconnection: close\r\n\r\n{\"detail\":\"sim serve: too many connections\"}";

/// Hands out connection slots.
#[derive(Clone)]
pub struct Gate {
    slots: Arc<Semaphore>,
    limits: Limits,
}

impl Gate {
    pub fn new(limits: Limits) -> Gate {
        Gate {
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            limits,
        }
    }

    /// The stream of an accepted connection, or `None` when every slot is taken (the
    /// connection is then answered 503 and closed in the background).
    pub fn admit(&self, stream: TcpStream) -> Option<Guarded> {
        match self.slots.clone().try_acquire_owned() {
            Ok(permit) => Some(Guarded::new(stream, Some((permit, self.limits)))),
            Err(_) => {
                tokio::spawn(async move {
                    let mut stream = stream;
                    let _ = stream.write_all(BUSY).await;
                    let _ = stream.shutdown().await;
                });
                None
            }
        }
    }
}

/// A TCP stream, with the limits of the connection it carries when it is a served one.
pub struct Guarded {
    inner: TcpStream,
    guard: Option<Guard>,
}

struct Guard {
    _permit: OwnedSemaphorePermit,
    limits: Limits,
    framing: Framing,
    /// Bytes of the current head (or chunk-size or trailer line).
    head: Vec<u8>,
    /// When the current request must be in; set at its first byte.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Body bytes of the current request so far.
    body: u64,
}

/// Where the reader is in the client's byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Between requests.
    Idle,
    /// In a request's head.
    Head,
    /// In a body of known length: bytes left.
    Body(u64),
    /// In a chunked body: reading a chunk-size line.
    ChunkSize,
    /// Chunk data: bytes left, then its CRLF.
    ChunkData(u64),
    ChunkDataEnd,
    /// After the last chunk: trailer lines up to a blank one.
    Trailers,
    /// Over a limit: the rest of the stream is not handed on.
    Refused,
}

impl Guarded {
    fn new(inner: TcpStream, guard: Option<(OwnedSemaphorePermit, Limits)>) -> Guarded {
        Guarded {
            inner,
            guard: guard.map(|(permit, limits)| Guard {
                _permit: permit,
                limits,
                framing: Framing::Idle,
                head: Vec::new(),
                deadline: None,
                body: 0,
            }),
        }
    }

    /// A stream with no limits (the harness's own connections).
    pub fn plain(inner: TcpStream) -> Guarded {
        Guarded::new(inner, None)
    }
}

impl Guard {
    /// Feeds the bytes just read through the framing; returns how many may be handed on (all
    /// of them, or those before the point where a limit was crossed).
    fn feed(&mut self, bytes: &[u8]) -> usize {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match self.framing {
                Framing::Refused => return i,
                Framing::Idle => {
                    self.framing = Framing::Head;
                    self.head.clear();
                    self.body = 0;
                    self.deadline = Some(Box::pin(tokio::time::sleep(self.limits.request_read)));
                    continue;
                }
                Framing::Head => {
                    self.head.push(b);
                    if self.head.len() > self.limits.max_head {
                        self.framing = Framing::Refused;
                        return i;
                    }
                    if self.head.ends_with(b"\r\n\r\n") || self.head == b"\r\n" {
                        self.framing = self.after_head();
                    }
                }
                Framing::Body(left) => {
                    let n = (left as usize).min(bytes.len() - i);
                    let left = left - n as u64;
                    self.framing = if left == 0 {
                        self.end()
                    } else {
                        Framing::Body(left)
                    };
                    i += n;
                    continue;
                }
                Framing::ChunkSize => {
                    self.head.push(b);
                    if self.head.len() > self.limits.max_head {
                        self.framing = Framing::Refused;
                        return i;
                    }
                    if self.head.ends_with(b"\r\n") {
                        let line = String::from_utf8_lossy(&self.head).into_owned();
                        let size = line.split(';').next().unwrap_or("").trim();
                        self.head.clear();
                        match u64::from_str_radix(size, 16) {
                            Ok(0) => self.framing = Framing::Trailers,
                            Ok(n) => {
                                self.body = self.body.saturating_add(n);
                                if self.body > self.limits.max_body {
                                    self.framing = Framing::Refused;
                                    return i + 1;
                                }
                                self.framing = Framing::ChunkData(n);
                            }
                            // hyper refuses the malformed chunk itself.
                            Err(_) => self.framing = self.end(),
                        }
                    }
                }
                Framing::ChunkData(left) => {
                    let n = (left as usize).min(bytes.len() - i);
                    let left = left - n as u64;
                    self.framing = if left == 0 {
                        Framing::ChunkDataEnd
                    } else {
                        Framing::ChunkData(left)
                    };
                    i += n;
                    continue;
                }
                Framing::ChunkDataEnd => {
                    self.head.push(b);
                    if self.head.ends_with(b"\r\n") || self.head.len() > 2 {
                        self.head.clear();
                        self.framing = Framing::ChunkSize;
                    }
                }
                Framing::Trailers => {
                    self.head.push(b);
                    if self.head == b"\r\n" || self.head.ends_with(b"\r\n\r\n") {
                        self.framing = self.end();
                    } else if self.head.len() > self.limits.max_head {
                        self.framing = Framing::Refused;
                        return i;
                    }
                }
            }
            i += 1;
        }
        bytes.len()
    }

    /// The framing after a complete head: its body by `Transfer-Encoding: chunked` or
    /// `Content-Length`, or none. A body over the limit is refused after the head, so the model
    /// sees the request and then its body end early.
    fn after_head(&mut self) -> Framing {
        let head = String::from_utf8_lossy(&self.head).to_ascii_lowercase();
        let mut length = 0u64;
        let mut chunked = false;
        for line in head.split("\r\n").skip(1) {
            if let Some((name, value)) = line.split_once(':') {
                match name.trim() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "transfer-encoding" => chunked = value.contains("chunked"),
                    _ => {}
                }
            }
        }
        self.head.clear();
        if chunked {
            Framing::ChunkSize
        } else if length > self.limits.max_body {
            Framing::Refused
        } else if length > 0 {
            Framing::Body(length)
        } else {
            self.end()
        }
    }

    /// A request is complete: the clock stops until the next one starts.
    fn end(&mut self) -> Framing {
        self.deadline = None;
        Framing::Idle
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let Some(guard) = this.guard.as_mut() else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        if guard.framing == Framing::Refused {
            // The model reads the end of the body here and answers 413.
            return Poll::Ready(Ok(()));
        }
        if let Some(deadline) = guard.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "sim serve: the request did not arrive in time",
            )));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let filled = buf.filled().len();
                let fresh = buf.filled()[before..].to_vec();
                let keep = guard.feed(&fresh);
                buf.set_filled(before + keep.min(filled - before));
                // A deadline armed by these bytes must wake this task when it passes.
                if let Some(deadline) = guard.deadline.as_mut() {
                    let _ = deadline.as_mut().poll(cx);
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
