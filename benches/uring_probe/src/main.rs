//! uring_probe: the smallest io_uring HTTP/1.1 load loop, a lower bound on
//! what an io_uring path in volley could cost per call.
//!
//!   uring_probe --url-port PORT -c CONNECTIONS -d SECONDS [--pipeline N]
//!               [--fixed] [--skip-send-cqe] [--wait K] [--min-wait-us T]
//!               [--no-defer] [--batch]
//!
//! --batch: wrk's pipelining (the next N requests go once all N are
//! answered) instead of keeping N in flight. --wait K --min-wait-us T:
//! wait for K completions, or for T microseconds once one has come
//! (IORING_ENTER_EXT_ARG's min_wait_usec, kernel 6.12).
//!
//! One ring on one thread (SINGLE_ISSUER + DEFER_TASKRUN, falling back to
//! COOP_TASKRUN, then to a plain ring), one provided buffer ring shared by
//! all connections, one multishot receive per connection, sends with the
//! Send op from one pre-built buffer of N requests. Each loop turn submits
//! and waits (submit_and_wait(K)), then drains every completion. Each
//! complete answer (status 200, head, Content-Length body) is counted and
//! replaced by one request; the answers parsed from one receive are
//! replaced by one send (coalesced).
//!
//! Prints `calls=N seconds=S calls_per_s=X user_s=U sys_s=Y` and a few
//! counters (loop turns, completions per turn).

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

const BGID: u16 = 7;
const OP_RECV: u64 = 0;
const OP_SEND: u64 = 1;
const BODY: &str = r#"{"jsonrpc":"2.0","method":"eth_chainId","id":1}"#;

fn die(msg: impl AsRef<str>) -> ! {
    eprintln!("uring_probe: {}", msg.as_ref());
    std::process::exit(1);
}

struct Args {
    port: u16,
    conns: usize,
    secs: f64,
    pipeline: u32,
    fixed: bool,
    skip_send_cqe: bool,
    wait: usize,
    no_defer: bool,
    batch: bool,
    min_wait_us: u32,
    buf_size: usize,
    buf_count: u16,
}

fn args() -> Args {
    let mut a = Args {
        port: 0,
        conns: 64,
        secs: 5.0,
        pipeline: 1,
        fixed: false,
        skip_send_cqe: false,
        wait: 1,
        no_defer: false,
        batch: false,
        min_wait_us: 0,
        buf_size: 4096,
        buf_count: 4096,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let val = |i: usize| -> &str { v.get(i + 1).map(|s| s.as_str()).unwrap_or_else(|| die(format!("{} needs a value", v[i]))) };
    while i < v.len() {
        match v[i].as_str() {
            "--url-port" | "--port" => { a.port = val(i).parse().unwrap_or_else(|_| die("bad port")); i += 1 }
            "-c" | "--connections" => { a.conns = val(i).parse().unwrap_or_else(|_| die("bad -c")); i += 1 }
            "-d" | "--duration" => { a.secs = val(i).trim_end_matches('s').parse().unwrap_or_else(|_| die("bad -d")); i += 1 }
            "--pipeline" => { a.pipeline = val(i).parse().unwrap_or_else(|_| die("bad --pipeline")); i += 1 }
            "--wait" => { a.wait = val(i).parse().unwrap_or_else(|_| die("bad --wait")); i += 1 }
            "--buf-size" => { a.buf_size = val(i).parse().unwrap_or_else(|_| die("bad --buf-size")); i += 1 }
            "--buf-count" => { a.buf_count = val(i).parse().unwrap_or_else(|_| die("bad --buf-count")); i += 1 }
            "--fixed" => a.fixed = true,
            "--skip-send-cqe" => a.skip_send_cqe = true,
            "--no-defer" => a.no_defer = true,
            "--batch" => a.batch = true,
            "--min-wait-us" => { a.min_wait_us = val(i).parse().unwrap_or_else(|_| die("bad --min-wait-us")); i += 1 }
            other => die(format!("unknown argument {other}")),
        }
        i += 1;
    }
    if a.port == 0 { die("--url-port PORT is required") }
    if a.conns == 0 || a.pipeline == 0 || a.wait == 0 { die("-c, --pipeline and --wait must be at least 1") }
    if !a.buf_count.is_power_of_two() { die("--buf-count must be a power of two") }
    a
}

/// Parses complete answers at the front of `buf`: (answers, bytes consumed).
#[inline]
fn parse(buf: &[u8]) -> (u32, usize) {
    let mut p = 0;
    let mut n = 0;
    loop {
        let rest = &buf[p..];
        // End of head.
        let Some(h) = find_head_end(rest) else { break };
        let head = &rest[..h];
        if !(head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200")) {
            die(format!("answer not 200: {:?}", String::from_utf8_lossy(&head[..head.len().min(80)])));
        }
        let cl = content_length(head).unwrap_or_else(|| die("answer without Content-Length"));
        let end = h + 4 + cl;
        if end > rest.len() { break }
        n += 1;
        p += end;
    }
    (n, p)
}

#[inline]
fn find_head_end(b: &[u8]) -> Option<usize> {
    let mut i = 3;
    while i < b.len() {
        // Step on '\n': the last byte of \r\n\r\n.
        if b[i] == b'\n' && b[i - 1] == b'\r' && b[i - 2] == b'\n' && b[i - 3] == b'\r' {
            return Some(i - 3);
        }
        i += 1;
    }
    None
}

#[inline]
fn content_length(head: &[u8]) -> Option<usize> {
    for line in head.split(|&c| c == b'\n').skip(1) {
        if line.len() > 15 && line[..15].eq_ignore_ascii_case(b"content-length:") {
            let mut v = 0usize;
            let mut seen = false;
            for &c in &line[15..] {
                match c {
                    b'0'..=b'9' => { v = v * 10 + (c - b'0') as usize; seen = true }
                    b' ' | b'\t' | b'\r' => {}
                    _ => return None,
                }
            }
            return seen.then_some(v);
        }
    }
    None
}

#[repr(C)]
struct GetEventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}
const IORING_ENTER_GETEVENTS: u32 = 1;
const IORING_ENTER_EXT_ARG: u32 = 8;

struct Conn {
    /// Partial answer kept across receives.
    carry: Vec<u8>,
    /// Answers received whose replacement request is not yet sent.
    owed: u32,
    /// Requests sent (or being sent) and not yet answered.
    in_flight: u32,
    sending: bool,
    send_off: u32,
    send_len: u32,
}

fn main() {
    let a = args();
    let req_one = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
        BODY.len(),
        BODY
    );
    let reqs: Vec<u8> = req_one.as_bytes().repeat(a.pipeline as usize);
    let req_len = req_one.len() as u32;

    // Connections.
    let streams: Vec<TcpStream> = (0..a.conns)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", a.port)).unwrap_or_else(|e| die(format!("connect: {e}")));
            s.set_nodelay(true).unwrap_or_else(|e| die(format!("nodelay: {e}")));
            s
        })
        .collect();
    let fds: Vec<i32> = streams.iter().map(|s| s.as_raw_fd()).collect();

    // Ring.
    let sq_entries = (a.conns * 2 + 64).next_power_of_two().clamp(256, 4096) as u32;
    let cq_entries = (sq_entries * 4).max((a.conns as u32 * (a.pipeline + 2)).next_power_of_two());
    let mut mode = "single_issuer+defer_taskrun";
    let mut ring: IoUring = {
        let r = if a.no_defer {
            Err(std::io::Error::from_raw_os_error(libc::EINVAL))
        } else {
            IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .setup_cqsize(cq_entries)
                .build(sq_entries)
        };
        match r {
            Ok(r) => r,
            Err(_) => {
                mode = "coop_taskrun";
                match IoUring::builder().setup_coop_taskrun().setup_cqsize(cq_entries).build(sq_entries) {
                    Ok(r) => r,
                    Err(_) => {
                        mode = "plain";
                        IoUring::builder().setup_cqsize(cq_entries).build(sq_entries).unwrap_or_else(|e| die(format!("io_uring: {e}")))
                    }
                }
            }
        }
    };
    if a.fixed {
        ring.submitter().register_files(&fds).unwrap_or_else(|e| die(format!("register_files: {e}")));
    }

    // Provided buffer ring.
    let nbuf = a.buf_count as usize;
    let mask = a.buf_count - 1;
    let ring_bytes = nbuf * std::mem::size_of::<types::BufRingEntry>();
    let br = unsafe {
        libc::mmap(std::ptr::null_mut(), ring_bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    if br == libc::MAP_FAILED { die("mmap buffer ring") }
    let br = br as *mut types::BufRingEntry;
    let mut bufs: Vec<u8> = vec![0u8; nbuf * a.buf_size];
    let bufs_base = bufs.as_mut_ptr();
    for i in 0..nbuf {
        let e = unsafe { &mut *br.add(i) };
        e.set_addr(bufs_base as u64 + (i * a.buf_size) as u64);
        e.set_len(a.buf_size as u32);
        e.set_bid(i as u16);
    }
    let tail: &AtomicU16 = unsafe { &*(types::BufRingEntry::tail(br) as *const AtomicU16) };
    let mut local_tail: u16 = a.buf_count; // all buffers handed over
    tail.store(local_tail, Ordering::Release);
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(br as u64, a.buf_count, BGID, 0)
            .unwrap_or_else(|e| die(format!("register_buf_ring: {e}")));
    }

    let mut conns: Vec<Conn> = (0..a.conns)
        .map(|_| Conn { carry: Vec::new(), owed: a.pipeline, in_flight: 0, sending: false, send_off: 0, send_len: 0 })
        .collect();

    let fixed = a.fixed;
    let batch = a.batch;
    let ring_fd = ring.as_raw_fd();
    let skip = a.skip_send_cqe;
    let recv_sqe = |i: usize| -> squeue::Entry {
        let e = if fixed {
            opcode::RecvMulti::new(types::Fixed(i as u32), BGID).build()
        } else {
            opcode::RecvMulti::new(types::Fd(fds[i]), BGID).build()
        };
        e.user_data(((i as u64) << 1) | OP_RECV)
    };
    let reqs_ptr = reqs.as_ptr();
    let send_sqe = |i: usize, off: u32, len: u32| -> squeue::Entry {
        let p = unsafe { reqs_ptr.add(off as usize) };
        // Without a completion on success, a short send must not count as
        // success: MSG_WAITALL makes the kernel finish it.
        let fl = libc::MSG_NOSIGNAL | if skip { libc::MSG_WAITALL } else { 0 };
        let e = if fixed {
            opcode::Send::new(types::Fixed(i as u32), p, len).flags(fl).build()
        } else {
            opcode::Send::new(types::Fd(fds[i]), p, len).flags(fl).build()
        };
        let e = e.user_data(((i as u64) << 1) | OP_SEND);
        if skip { e.flags(squeue::Flags::SKIP_SUCCESS) } else { e }
    };

    let (submitter, mut sq, mut cq) = ring.split();
    // Pushes one entry, submitting first if the queue is full.
    macro_rules! push {
        ($e:expr) => {{
            let e = $e;
            if unsafe { sq.push(&e) }.is_err() {
                sq.sync();
                submitter.submit().unwrap_or_else(|err| die(format!("submit: {err}")));
                sq.sync();
                unsafe { sq.push(&e) }.unwrap_or_else(|_| die("submission queue full"));
            }
        }};
    }
    // Starts the send of all owed requests on connection i.
    macro_rules! start_send {
        ($i:expr) => {{
            let i = $i;
            let c = &mut conns[i];
            let len = c.owed * req_len;
            c.in_flight += c.owed;
            c.owed = 0;
            if skip {
                // No completion on success: one send need not finish
                // before the next starts (all requests are alike).
                push!(send_sqe(i, 0, len));
            } else {
                c.sending = true;
                c.send_off = 0;
                c.send_len = len;
                push!(send_sqe(i, 0, len));
            }
        }};
    }

    for i in 0..a.conns {
        push!(recv_sqe(i));
        start_send!(i);
    }
    sq.sync();

    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(a.secs);
    let mut calls: u64 = 0;
    let mut turns: u64 = 0;
    let mut cqes: u64 = 0;
    let wait = a.wait.min(a.conns);
    let end;
    loop {
        if a.min_wait_us == 0 {
            submitter.submit_and_wait(wait).unwrap_or_else(|e| die(format!("submit_and_wait: {e}")));
        } else {
            let arg = GetEventsArg { sigmask: 0, sigmask_sz: 0, min_wait_usec: a.min_wait_us, ts: 0 };
            let r = unsafe {
                libc::syscall(
                    libc::SYS_io_uring_enter,
                    ring_fd,
                    sq.len() as u32,
                    wait as u32,
                    IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                    &arg as *const GetEventsArg,
                    std::mem::size_of::<GetEventsArg>(),
                )
            };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if !matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) {
                    die(format!("io_uring_enter: {e}"));
                }
            }
        }
        turns += 1;
        cq.sync();
        let mut returned = false;
        for cqe in &mut cq {
            cqes += 1;
            let ud = cqe.user_data();
            let i = (ud >> 1) as usize;
            let res = cqe.result();
            let flags = cqe.flags();
            if ud & 1 == OP_SEND {
                if res < 0 {
                    die(format!("send on connection {i}: {}", std::io::Error::from_raw_os_error(-res)));
                }
                if skip {
                    die(format!("short or failed send on connection {i}: {res}"));
                }
                let c = &mut conns[i];
                c.send_off += res as u32;
                if c.send_off < c.send_len {
                    let (off, len) = (c.send_off, c.send_len - c.send_off);
                    push!(send_sqe(i, off, len));
                } else {
                    c.sending = false;
                    if c.owed > 0 && (!batch || c.in_flight == 0) {
                        start_send!(i);
                    }
                }
                continue;
            }
            // Receive.
            if res < 0 {
                if res == -libc::ENOBUFS {
                    push!(recv_sqe(i));
                    continue;
                }
                die(format!("recv on connection {i}: {}", std::io::Error::from_raw_os_error(-res)));
            }
            if res == 0 {
                die(format!("connection {i} closed by the server with {} calls in flight", conns[i].in_flight));
            }
            let bid = cqueue::buffer_select(flags).unwrap_or_else(|| die("receive without a buffer"));
            let data = unsafe { std::slice::from_raw_parts(bufs_base.add(bid as usize * a.buf_size), res as usize) };
            let c = &mut conns[i];
            let k = if c.carry.is_empty() {
                let (k, used) = parse(data);
                if used < data.len() {
                    c.carry.extend_from_slice(&data[used..]);
                }
                k
            } else {
                c.carry.extend_from_slice(data);
                let (k, used) = parse(&c.carry);
                c.carry.drain(..used);
                k
            };
            // Hand the buffer back.
            unsafe {
                let e = &mut *br.add((local_tail & mask) as usize);
                e.set_addr(bufs_base as u64 + (bid as usize * a.buf_size) as u64);
                e.set_len(a.buf_size as u32);
                e.set_bid(bid);
            }
            local_tail = local_tail.wrapping_add(1);
            returned = true;
            if k > c.in_flight {
                die(format!("connection {i}: {k} answers for {} requests", c.in_flight));
            }
            c.in_flight -= k;
            calls += k as u64;
            c.owed += k;
            if !c.sending && c.owed > 0 && (!batch || c.in_flight == 0) {
                start_send!(i);
            }
            if !cqueue::more(flags) {
                push!(recv_sqe(i));
            }
        }
        if returned {
            tail.store(local_tail, Ordering::Release);
        }
        // Hand the consumed completions back before waiting: the kernel
        // counts unconsumed ones toward submit_and_wait's `want`.
        cq.sync();
        sq.sync();
        let now = Instant::now();
        if now >= deadline {
            end = now;
            break;
        }
    }
    let secs = (end - start).as_secs_f64();
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    println!(
        "calls={} seconds={:.3} calls_per_s={:.0} user_s={:.3} sys_s={:.3} ring={} turns={} cqes_per_turn={:.2}",
        calls,
        secs,
        calls as f64 / secs,
        tv(ru.ru_utime),
        tv(ru.ru_stime),
        mode,
        turns,
        cqes as f64 / turns.max(1) as f64
    );
    drop(streams);
}
