//! One topology on one running nginx: imports [`crate::site`] and [`crate::nginx`].
//!
//! * [`observation`]: what one request ended as — the one observation type of runs, recording and replay;
//! * [`parity`] plans request sequences (random keys, the empty key, and forged keys at both ends of every
//!   ring arc), sends them pipelined on one connection ([`client`]) and compares them with the per-worker
//!   simulator ([`clock`]: following nginx's clock, which decides when a failed server comes back);
//! * [`keyed`] sends generated requests that carry their key in themselves (key expressions) and judges
//!   them through the library's dispatch;
//! * [`stream`] does the same for the stream module.

pub mod client;
pub mod clock;
pub mod keyed;
pub mod observation;
pub mod parity;
pub mod stream;
