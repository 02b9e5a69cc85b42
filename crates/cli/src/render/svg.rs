//! The ring as a picture: the hash space as a circle (0 at the top, growing clockwise), each arc coloured by
//! the server that answers it; for a diff, the map before (outer ring) and after (middle ring) and the arcs
//! that move (inner ring, red).
//!
//! Arcs are drawn exactly as the maps give them while there are at most [`MAX_ARCS`]; beyond that (large
//! rings) the circle is cut into [`BINS`] equal bins and each bin takes the colour of whoever answers most
//! of it, which the caption says.

use super::xml::text;
use anyhow::Result;
use nginx_ketama::Server;
use nginx_ketama::analysis::{Diff, HASH_SPACE, Pick, PickMap, ServerHealth, Share};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The most arcs drawn one by one per ring.
const MAX_ARCS: usize = 3000;

/// Bins per ring when there are more arcs than [`MAX_ARCS`] (0.1° each).
const BINS: usize = 3600;

/// Legend entries shown (the rest are summed up in one line).
const LEGEND: usize = 24;

/// One arc as drawn: `[start, end)` of the hash space (as `u64`, `end ≤ 2³²`) and who is shown on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Drawn<T> {
    /// First hash value.
    start: u64,
    /// One past the last.
    end: u64,
    /// Who is shown.
    who: T,
}

/// How arcs were laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Every arc exactly.
    Exact,
    /// [`BINS`] bins, each coloured by its largest part.
    Binned,
}

/// The arcs to draw for segments `(start, len, who)` covering the whole space: the segments themselves, or
/// bins coloured by their largest part.
fn layout<T: Copy + Eq>(segments: &[(u64, u64, T)]) -> (Layout, Vec<Drawn<T>>) {
    // The largest part; on a tie the one that comes first in the bin.
    layout_by(segments, |parts| parts.iter().fold(parts[0], |best, &p| if p.1 > best.1 { p } else { best }).0)
}

/// The arcs of moved (`true`) and kept segments: the segments, or bins shown as moved when anything in
/// them moves (a majority would hide the many small arcs a removed server leaves).
fn layout_moved(segments: &[(u64, u64, bool)]) -> (Layout, Vec<Drawn<bool>>) {
    layout_by(segments, |parts| parts.iter().any(|p| p.0))
}

/// [`layout`] with the rule that colours a bin from its parts `(who, length)`, in order of appearance.
fn layout_by<T: Copy + Eq>(segments: &[(u64, u64, T)], rule: impl Fn(&[(T, u64)]) -> T) -> (Layout, Vec<Drawn<T>>) {
    if segments.len() <= MAX_ARCS {
        let drawn = segments.iter().map(|&(start, len, who)| Drawn { start, end: start + len, who }).collect();
        return (Layout::Exact, merge(drawn));
    }
    let width = HASH_SPACE.div_ceil(BINS as u64);
    let mut drawn = Vec::with_capacity(BINS);
    // `first`: the first segment that ends after the current bin's start.
    let mut first = 0;
    for b in 0..BINS as u64 {
        let (lo, hi) = (b * width, ((b + 1) * width).min(HASH_SPACE));
        while segments[first].0 + segments[first].1 <= lo {
            first += 1;
        }
        let mut parts: Vec<(T, u64)> = Vec::new();
        for &(start, len, who) in segments[first..].iter().take_while(|s| s.0 < hi) {
            let n = (start + len).min(hi) - start.max(lo);
            match parts.iter_mut().find(|p| p.0 == who) {
                Some(p) => p.1 += n,
                None => parts.push((who, n)),
            }
        }
        let who = rule(&parts);
        drawn.push(Drawn { start: lo, end: hi, who });
    }
    (Layout::Binned, merge(drawn))
}

/// Adjacent arcs with the same colour become one.
fn merge<T: Copy + Eq>(drawn: Vec<Drawn<T>>) -> Vec<Drawn<T>> {
    let mut out: Vec<Drawn<T>> = Vec::with_capacity(drawn.len());
    for d in drawn {
        match out.last_mut() {
            Some(last) if last.who == d.who && last.end == d.start => last.end = d.end,
            _ => out.push(d),
        }
    }
    out
}

/// A server's colour: a fixed palette of 12, then hues spread by the golden angle.
fn colour(i: usize) -> String {
    const PALETTE: [&str; 12] = [
        "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f", "#2f4b7c", "#a0cbe8",
        "#8cd17d", "#d4a6c8",
    ];
    match PALETTE.get(i) {
        Some(c) => (*c).to_string(),
        None => format!("hsl({:.1},55%,55%)", (i as f64 * 137.507_764) % 360.0),
    }
}

const ROUND_ROBIN_COLOUR: &str = "#c8c8c8";
const MOVED_COLOUR: &str = "#d62728";
const KEPT_COLOUR: &str = "#f0f0f0";

const SIZE: f64 = 700.0;
const CENTER: f64 = SIZE / 2.0;

/// A point at hash position `h` (0 at the top, clockwise) and radius `r`.
fn at(h: u64, r: f64) -> (f64, f64) {
    let a = h as f64 / HASH_SPACE as f64 * std::f64::consts::TAU;
    (CENTER + r * a.sin(), CENTER - r * a.cos())
}

/// One ring of annulus sectors between two radii, gathered by colour: one `<path>` per colour, each sector
/// a subpath (the ring is drawn by [`Ring::finish`]).
struct Ring {
    inner: f64,
    outer: f64,
    /// `(colour, path data)` in order of first use.
    paths: Vec<(String, String)>,
}

impl Ring {
    fn new(inner: f64, outer: f64) -> Ring {
        Ring { inner, outer, paths: Vec::new() }
    }

    /// The sector `[start, end)`, split so that no SVG arc spans more than half the circle.
    fn sector(&mut self, start: u64, end: u64, fill: &str) {
        let d = match self.paths.iter_mut().find(|(c, _)| c == fill) {
            Some((_, d)) => d,
            None => {
                self.paths.push((fill.to_string(), String::new()));
                &mut self.paths.last_mut().expect("just pushed").1
            }
        };
        let (inner, outer) = (self.inner, self.outer);
        let half = HASH_SPACE / 2;
        let mut s = start;
        while s < end {
            let e = end.min(s + half);
            let (x0, y0) = at(s, outer);
            let (x1, y1) = at(e, outer);
            let (x2, y2) = at(e, inner);
            let (x3, y3) = at(s, inner);
            let _ = write!(
                d,
                "M{x0:.1},{y0:.1}A{outer},{outer} 0 0 1 {x1:.1},{y1:.1}L{x2:.1},{y2:.1}A{inner},{inner} 0 0 0 {x3:.1},{y3:.1}Z"
            );
            s = e;
        }
    }

    /// The paths; a thin stroke in the fill colour closes the seams between neighbouring sectors.
    fn finish(self, out: &mut String) {
        for (fill, d) in self.paths {
            let _ = writeln!(out, r#"<path d="{d}" fill="{fill}" stroke="{fill}" stroke-width="0.3"/>"#);
        }
    }
}

/// Tick marks and labels at every eighth of the hash space.
fn ticks(out: &mut String, radius: f64) {
    for k in 0..8u64 {
        let h = k * HASH_SPACE / 8;
        let (x0, y0) = at(h, radius + 2.0);
        let (x1, y1) = at(h, radius + 10.0);
        let (tx, ty) = at(h, radius + 14.0);
        // Labels sit outside the ring: left of it on the left half, right of it on the right half.
        let anchor = match k {
            0 | 4 => "middle",
            1..=3 => "start",
            _ => "end",
        };
        let dy = match k {
            0 => -6.0,
            4 => 6.0,
            _ => 0.0,
        };
        let _ = writeln!(out, r##"<line x1="{x0:.2}" y1="{y0:.2}" x2="{x1:.2}" y2="{y1:.2}" stroke="#555"/>"##);
        let _ = writeln!(
            out,
            r##"<text x="{tx:.2}" y="{:.2}" font-size="11" text-anchor="{anchor}" dominant-baseline="middle" fill="#555">{h:08x}</text>"##,
            ty + dy
        );
    }
}

fn header(out: &mut String, height: f64, title: &str, subtitle: &str) {
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}" font-family="DejaVu Sans, Arial, sans-serif">"#,
        w = SIZE + 400.0
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ =
        writeln!(out, r#"<text x="{}" y="28" font-size="17" font-weight="bold">{}</text>"#, SIZE + 10.0, text(title));
    for (i, line) in subtitle.lines().enumerate() {
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" font-size="12" fill="#333">{}</text>"##,
            SIZE + 10.0,
            50.0 + 16.0 * i as f64,
            text(line)
        );
    }
}

/// Legend rows `(colour, label)` from `y` on.
fn legend(out: &mut String, y: f64, rows: &[(String, String)]) {
    for (i, (fill, label)) in rows.iter().enumerate() {
        let yy = y + 20.0 * i as f64;
        let _ = writeln!(
            out,
            r##"<rect x="{}" y="{}" width="14" height="14" fill="{fill}" stroke="#555" stroke-width="0.5"/>"##,
            SIZE + 10.0,
            yy - 11.0
        );
        let _ = writeln!(out, r#"<text x="{}" y="{yy}" font-size="12">{}</text>"#, SIZE + 30.0, text(label));
    }
}

fn percent(n: u64) -> String {
    format!("{:.3}%", n as f64 * 100.0 / HASH_SPACE as f64)
}

/// Legend rows for servers (by union index) with their counts, largest first, capped at [`LEGEND`].
fn server_rows(
    servers: &[Server],
    counts: &[u64],
    round_robin: u64,
    rest_share: bool,
    label: impl Fn(usize) -> String,
) -> Vec<(String, String)> {
    let mut order: Vec<usize> = (0..servers.len()).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let mut rows: Vec<(String, String)> = order.iter().take(LEGEND).map(|&i| (colour(i), label(i))).collect();
    if order.len() > LEGEND {
        let rest: u64 = order[LEGEND..].iter().map(|&i| counts[i]).sum();
        let more = order.len() - LEGEND;
        rows.push((
            "#ffffff".into(),
            if rest_share {
                format!("… {more} more servers: {}", percent(rest))
            } else {
                format!("… {more} more servers")
            },
        ));
    }
    if round_robin > 0 {
        rows.push((ROUND_ROBIN_COLOUR.into(), format!("round-robin: {}", percent(round_robin))));
    }
    rows
}

fn segments_of(map: &PickMap, index: &[usize]) -> Vec<(u64, u64, Option<usize>)> {
    map.segments()
        .map(|s| {
            let who = match s.pick {
                Pick::Server(i) => Some(index[i]),
                Pick::RoundRobin => None,
            };
            (u64::from(s.start), s.len, who)
        })
        .collect()
}

fn fill_of(who: Option<usize>) -> String {
    who.map_or_else(|| ROUND_ROBIN_COLOUR.to_string(), colour)
}

fn caption(layout: Layout) -> &'static str {
    match layout {
        Layout::Exact => "every arc drawn exactly",
        Layout::Binned => "in 3,600 bins of 0.1°: the colour of the largest part",
    }
}

/// The picture of one map: its arcs coloured by server, a legend with each server's exact share.
pub(crate) fn share_svg(map: &PickMap, title: &str) -> String {
    let index: Vec<usize> = (0..map.servers().len()).collect();
    let segments = segments_of(map, &index);
    let (layout, drawn) = layout(&segments);
    let share = Share::of(map);
    let counts: Vec<u64> = share.servers.iter().map(|s| s.count).collect();
    let rows = server_rows(map.servers(), &counts, share.round_robin, true, |i| {
        let s = &share.servers[i];
        let health = match s.health {
            ServerHealth::Up => "",
            ServerHealth::Partial => ", partly failing",
            ServerHealth::Down => ", down",
            ServerHealth::Failing => ", failing",
        };
        format!("{}: {} ({} points, {} arcs{health})", s.server, percent(s.count), s.points, s.arcs)
    });
    let height = (SIZE).max(110.0 + 20.0 * rows.len() as f64);
    let mut out = String::new();
    let subtitle = format!("{} arcs, {}\n0 at the top, CRC32 growing clockwise", segments.len(), caption(layout));
    header(&mut out, height, title, &subtitle);
    let mut ring = Ring::new(200.0, 270.0);
    for d in &drawn {
        ring.sector(d.start, d.end, &fill_of(d.who));
    }
    ring.finish(&mut out);
    ticks(&mut out, 270.0);
    legend(&mut out, 100.0, &rows);
    out.push_str("</svg>\n");
    out
}

/// The picture of a change: the map before (outer ring), after (middle ring), and in red on the inner
/// ring the arcs whose answer moves.
pub(crate) fn diff_svg(from: &PickMap, to: &PickMap, title: &str) -> String {
    let diff = Diff::of(from, to);
    let position: HashMap<&Server, usize> = diff.servers.iter().enumerate().map(|(i, s)| (s, i)).collect();
    let from_index: Vec<usize> = from.servers().iter().map(|s| position[s]).collect();
    let to_index: Vec<usize> = to.servers().iter().map(|s| position[s]).collect();
    let (l1, before) = layout(&segments_of(from, &from_index));
    let (l2, after) = layout(&segments_of(to, &to_index));
    let moved: Vec<(u64, u64, bool)> = from
        .merge(to)
        .map(|o| {
            let a = match o.a {
                Pick::Server(i) => Some(from_index[i]),
                Pick::RoundRobin => None,
            };
            let b = match o.b {
                Pick::Server(i) => Some(to_index[i]),
                Pick::RoundRobin => None,
            };
            (u64::from(o.start), o.len, a != b)
        })
        .collect();
    let (l3, moves) = layout_moved(&moved);
    let binned = [l1, l2, l3].contains(&Layout::Binned);
    // The legend lists the servers that change most first.
    let counts: Vec<u64> = diff.changes.iter().map(|c| c.gained + c.lost).collect();
    let mut rows = vec![(MOVED_COLOUR.to_string(), format!("moved: {}", percent(diff.moved)))];
    rows.extend(server_rows(&diff.servers, &counts, diff.round_robin.0.max(diff.round_robin.1), false, |i| {
        let c = &diff.changes[i];
        format!("{}: {} → {}", c.server, percent(c.before), percent(c.after))
    }));
    let height = (SIZE).max(110.0 + 20.0 * rows.len() as f64);
    let mut out = String::new();
    let subtitle = if binned {
        format!(
            "outer: before · middle: after · inner: moved\n{};\non the inner ring a bin is red if any of it moves",
            caption(Layout::Binned)
        )
    } else {
        format!("outer: before · middle: after · inner: moved\n{}", caption(Layout::Exact))
    };
    header(&mut out, height, title, &subtitle);
    for (drawn, inner, outer) in [(&before, 232.0, 276.0), (&after, 184.0, 228.0)] {
        let mut ring = Ring::new(inner, outer);
        for d in drawn {
            ring.sector(d.start, d.end, &fill_of(d.who));
        }
        ring.finish(&mut out);
    }
    // The inner ring: kept as a background, moved arcs on top.
    let mut ring = Ring::new(150.0, 180.0);
    ring.sector(0, HASH_SPACE, KEPT_COLOUR);
    for d in moves.iter().filter(|d| d.who) {
        ring.sector(d.start, d.end, MOVED_COLOUR);
    }
    ring.finish(&mut out);
    ticks(&mut out, 276.0);
    let _ = writeln!(
        out,
        r#"<text x="{CENTER}" y="{CENTER}" font-size="22" text-anchor="middle" dominant-baseline="middle" fill="{MOVED_COLOUR}">{} moved</text>"#,
        percent(diff.moved)
    );
    legend(&mut out, 100.0, &rows);
    out.push_str("</svg>\n");
    out
}

/// The picture of a migration report: per upstream and engine, one bar per setting tried, as long as the
/// share of keys that keep their server (0 to 100%), the 95% interval drawn across sampled bars, the best
/// setting in green.
pub(crate) fn migrate_svg(tried: &[crate::analysis::Tried], title: &str) -> String {
    const LABEL: f64 = 330.0;
    const BAR: f64 = 640.0;
    const PITCH: f64 = 16.0;
    let x0 = 20.0 + LABEL;
    let groups =
        tried.windows(2).filter(|w| (&w[0].upstream, w[0].engine) != (&w[1].upstream, w[1].engine)).count() + 1;
    let top = 84.0;
    let height = top + PITCH * tried.len() as f64 + 26.0 * groups as f64 + 30.0;
    let width = x0 + BAR + 90.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(out, r#"<text x="20" y="28" font-size="17" font-weight="bold">{}</text>"#, text(title));
    let _ = writeln!(
        out,
        r##"<text x="20" y="50" font-size="12" fill="#333">Share of keys that keep their server, per setting; green: the best; bars with a line: sampled (95% interval), without: exact.</text>"##
    );
    for q in 0..=4 {
        let x = x0 + BAR * f64::from(q) / 4.0;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{}%</text>"##,
            top - 8.0,
            height - 24.0,
            top - 12.0,
            q * 25
        );
    }
    let mut y = top;
    let mut previous: Option<(&str, nginx_ketama::engines::Engine)> = None;
    for t in tried {
        if previous != Some((t.upstream.as_str(), t.engine)) {
            y += 26.0;
            let _ = writeln!(
                out,
                r#"<text x="20" y="{:.1}" font-size="13" font-weight="bold">upstream {} → {}</text>"#,
                y - 8.0,
                text(&t.upstream),
                text(&t.engine.to_string())
            );
            previous = Some((t.upstream.as_str(), t.engine));
        }
        let fill = if t.best { "#59a14f" } else { "#4e79a7" };
        let f = t.fraction();
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"#,
            x0 - 8.0,
            y + 10.0,
            text(&t.setting.to_string())
        );
        let _ = writeln!(out, r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.2}" height="12" fill="{fill}"/>"#, BAR * f);
        if matches!(t.comparison.method, nginx_ketama::analysis::compare::Method::Sampled { .. }) {
            let (lo, hi) = t.interval();
            let _ = writeln!(
                out,
                r##"<line x1="{:.2}" y1="{:.1}" x2="{:.2}" y2="{:.1}" stroke="#222" stroke-width="1.5"/>"##,
                x0 + BAR * lo,
                y + 6.0,
                x0 + BAR * hi,
                y + 6.0
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="11">{:.3}%</text>"#,
            x0 + BAR * f + 6.0,
            y + 10.0,
            f * 100.0
        );
        y += PITCH;
    }
    out.push_str("</svg>\n");
    out
}

/// Writes `--svg FILE` as `nginx_ketama_output` writes a file (whole, through a device or FIFO, never
/// replacing what is not a regular file), refusing one of the command's `inputs` (its configuration files
/// and `--keys`).
pub(crate) fn write(path: &Path, svg: &str, inputs: Vec<PathBuf>) -> Result<()> {
    nginx_ketama_output::write(path, svg.as_bytes(), &nginx_ketama_output::Options { create_dirs: false, inputs })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nginx_ketama::{Method, Peer, Upstream};

    fn up(n: usize, w: u32) -> Upstream {
        Upstream::builder(Method::Consistent)
            .peers((0..n).map(|i| Peer::new(format!("10.0.{}.{}:80", i / 256, i % 256)).with_weight(w)))
            .build()
            .unwrap()
    }

    #[test]
    fn exact_layout_is_the_map() {
        let map = PickMap::new(&up(5, 1));
        let index: Vec<usize> = (0..5).collect();
        let segs = segments_of(&map, &index);
        let (l, drawn) = layout(&segs);
        assert_eq!(l, Layout::Exact);
        assert_eq!(drawn.len(), segs.len());
        for (d, s) in drawn.iter().zip(map.segments()) {
            assert_eq!((d.start, d.end - d.start), (u64::from(s.start), s.len));
        }
    }

    #[test]
    fn binned_layout_covers_the_circle_with_majorities() {
        let map = PickMap::new(&up(100, 1));
        let index: Vec<usize> = (0..100).collect();
        let segs = segments_of(&map, &index);
        assert!(segs.len() > MAX_ARCS);
        let (l, drawn) = layout(&segs);
        assert_eq!(l, Layout::Binned);
        assert_eq!(drawn[0].start, 0);
        assert_eq!(drawn.last().unwrap().end, HASH_SPACE);
        assert!(drawn.windows(2).all(|w| w[0].end == w[1].start && w[0].who != w[1].who));
        // Each bin's colour answers at least as much of the bin as any other server (brute force).
        let width = HASH_SPACE.div_ceil(BINS as u64);
        for b in (0..BINS as u64).step_by(7) {
            let (lo, hi) = (b * width, ((b + 1) * width).min(HASH_SPACE));
            let shown = drawn.iter().find(|d| d.start <= lo && lo < d.end).unwrap().who;
            let mut parts: HashMap<Option<usize>, u64> = HashMap::new();
            for &(s, len, who) in &segs {
                let (a, e) = (s.max(lo), (s + len).min(hi));
                if a < e {
                    *parts.entry(who).or_insert(0) += e - a;
                }
            }
            assert_eq!(parts[&shown], *parts.values().max().unwrap(), "bin {b}");
        }
    }

    #[test]
    fn a_picture_is_one_svg_naming_its_servers() {
        let up = Upstream::builder(Method::Consistent).peers(["a:80", "b:80"].map(Peer::new)).build().unwrap();
        let picture = share_svg(&PickMap::new(&up), "upstream app");
        assert!(picture.starts_with("<svg") && picture.ends_with("</svg>\n") && picture.contains("a:80"));
    }

    #[test]
    fn pictures_name_every_server_and_text() {
        let u = Upstream::builder(Method::Consistent).peers(["a<b>:80", "c&d:80"].map(Peer::new)).build().unwrap();
        let s = share_svg(&PickMap::new(&u), "t \"x\"");
        assert!(s.contains("a&lt;b&gt;:80") && s.contains("c&amp;d:80") && s.contains(r#">t "x"</text>"#));
        let v = Upstream::builder(Method::Consistent).peers(["a<b>:80", "e:80"].map(Peer::new)).build().unwrap();
        let d = diff_svg(&PickMap::new(&u), &PickMap::new(&v), "diff");
        assert!(d.contains("moved") && d.contains(MOVED_COLOUR));
    }
}
