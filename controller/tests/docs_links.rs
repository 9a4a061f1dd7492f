//! The documentation's links: every relative link of README.md, CHANGELOG.md, examples/README.md, mutants/REPORT.md
//! and docs/**/*.md names a file or folder that exists, and every `#anchor` matches a heading of the page it points
//! to, as GitHub renders it. External links (with a scheme, such as `https:`) are not followed.
//!
//! The checker is small and self-contained: links are found outside fenced code blocks and inline code spans, as
//! inline links (`[text](target "title")`, images too) and reference definitions (`[label]: target`); headings are
//! ATX headings (`## Title`), whose anchors follow GitHub's rules: lowercase, every character but letters, digits,
//! spaces, `-` and `_` dropped, each space turned into `-`, and `-1`, `-2`, ... appended to repeated ones.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The pages checked: the top-level documents and every Markdown file under `docs/`.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> =
        ["README.md", "CHANGELOG.md", "examples/README.md", "mutants/REPORT.md"].iter().map(|p| root.join(p)).collect();
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// A fence line (three or more backticks or tildes, indented at most three spaces): its character and length.
fn fence(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = rest.chars().take_while(|x| *x == c).count();
    (indent <= 3 && n >= 3).then_some((c, n))
}

/// The lines of `text` outside fenced code blocks, with their line numbers (1-based).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut open: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        match (open, fence(line)) {
            (None, Some(f)) => open = Some(f),
            (Some((c, n)), Some((c2, n2))) if c == c2 && n2 >= n && line.trim().chars().all(|x| x == c) => open = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// `text` with its inline code spans blanked out (a code span is never a link), byte for byte, so that offsets into
/// it are offsets into `text`; line breaks are kept.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        // The closing run: exactly as many backticks.
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let k = chars[j..].iter().take_while(|c| **c == '`').count();
                if k == run {
                    close = Some(j);
                    break;
                }
                j += k;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                for c in &chars[i..j + run] {
                    if *c == '\n' {
                        out.push('\n');
                    } else {
                        out.push_str(&" ".repeat(c.len_utf8()));
                    }
                }
                i = j + run;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The targets of the inline links and images in `text` (code spans already blanked out), with the byte offset of
/// each in `text`.
fn inline_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let offset = text.len() - rest.len() + at;
        let after = &rest[at + 2..];
        // The target runs to the parenthesis that closes the one opened here.
        let mut depth = 1;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inside = after[..end].trim();
        let target = match inside.strip_prefix('<') {
            Some(bracketed) => bracketed.split('>').next().unwrap_or_default(),
            None => inside.split_whitespace().next().unwrap_or_default(),
        };
        targets.push((offset, target.to_string()));
        rest = &after[end..];
    }
    targets
}

/// The target of a reference definition (`[label]: target`), if `line` is one.
fn reference_target(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 || !trimmed.starts_with('[') || trimmed.starts_with("[^") {
        return None;
    }
    let (_, after) = trimmed.split_once("]:")?;
    let target = after.split_whitespace().next()?;
    Some(target.trim_start_matches('<').trim_end_matches('>').to_string())
}

/// Every link target of a page, with the line it is on. Paragraphs are read whole, so that a link whose text wraps
/// over lines is found.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    // The paragraph being read: its text (lines joined by line breaks) and the number of its first line.
    let mut paragraph = String::new();
    let mut first_line = 0;
    let flush = |paragraph: &mut String, first_line: usize, out: &mut Vec<(usize, String)>| {
        let blanked = without_code_spans(paragraph);
        for (offset, target) in inline_targets(&blanked) {
            out.push((first_line + blanked[..offset].matches('\n').count(), target));
        }
        paragraph.clear();
    };
    let mut previous = 0;
    for (number, line) in prose_lines(text) {
        // A blank line, or a fenced block between two lines, ends the paragraph.
        if line.trim().is_empty() || number != previous + 1 {
            flush(&mut paragraph, first_line, &mut out);
        }
        previous = number;
        if let Some(target) = reference_target(line) {
            out.push((number, target));
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if paragraph.is_empty() {
            first_line = number;
        } else {
            paragraph.push('\n');
        }
        paragraph.push_str(line);
    }
    flush(&mut paragraph, first_line, &mut out);
    out
}

/// The anchor GitHub gives a heading's text.
fn slug(heading: &str) -> String {
    // Links in a heading count by their text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else { break };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else { break };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's ATX headings, repeated ones numbered as GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() > 3 {
            continue;
        }
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&level) {
            continue;
        }
        let title = &trimmed[level..];
        if !(title.is_empty() || title.starts_with(' ') || title.starts_with('\t')) {
            continue;
        }
        // A closing sequence of `#`s (preceded by a space) is not part of the title.
        let title = title.trim();
        let title = match title.trim_end_matches('#') {
            stripped if stripped.is_empty() || stripped.ends_with(' ') => stripped.trim_end(),
            _ => title,
        };
        let base = slug(title);
        let mut anchor = base.clone();
        let mut n = 0;
        while anchors.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        anchors.insert(anchor);
    }
    anchors
}

/// Whether a link target has a scheme (`https:`, `mailto:`, ...): not a file of the repository.
fn is_external(target: &str) -> bool {
    let scheme: String = target.chars().take_while(|c| c.is_ascii_alphanumeric() || "+.-".contains(*c)).collect();
    !scheme.is_empty()
        && target[scheme.len()..].starts_with(':')
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// What is wrong with the links of `page`, one line each, naming the page, the line and the target.
fn broken_links(page: &Path, root: &Path) -> Vec<String> {
    let shown = page.strip_prefix(root).unwrap_or(page).display().to_string();
    let text = match std::fs::read_to_string(page) {
        Ok(text) => text,
        Err(e) => return vec![format!("{shown}: cannot be read: {e}")],
    };
    let mut problems = Vec::new();
    for (line, target) in links(&text) {
        if target.is_empty() {
            problems.push(format!("{shown}:{line}: an empty link target"));
            continue;
        }
        if is_external(&target) {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let path = path.replace("%20", " ");
        let file = if path.is_empty() {
            page.to_path_buf()
        } else if let Some(from_root) = path.strip_prefix('/') {
            root.join(from_root)
        } else {
            page.parent().unwrap_or(root).join(&path)
        };
        let named = file.strip_prefix(root).unwrap_or(&file).display().to_string();
        if !file.exists() {
            problems.push(format!("{shown}:{line}: {target}: {named} does not exist"));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if file.is_dir() || file.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let headings = std::fs::read_to_string(&file).map(|t| anchors(&t)).unwrap_or_default();
        if !headings.contains(anchor) {
            problems.push(format!("{shown}:{line}: {target}: no heading of {named} has the anchor #{anchor}"));
        }
    }
    problems
}

#[test]
fn every_relative_link_and_anchor_of_the_documentation_resolves() {
    let root = repo_root();
    let pages = pages(&root);
    assert!(pages.iter().filter(|p| p.starts_with(root.join("docs"))).count() >= 10, "the docs/ pages: {pages:?}");
    let mut links_checked = 0;
    let mut problems = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap_or_default();
        links_checked += links(&text).len();
        problems.extend(broken_links(page, &root));
    }
    assert!(links_checked >= 100, "only {links_checked} links found: the parser finds too little");
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
}

/// The checker on pages made for it: it must report a missing file and a missing anchor, and nothing else.
#[test]
fn the_checker_reports_a_missing_file_and_a_missing_anchor() {
    let dir = std::env::temp_dir().join(format!("docs-links-{}-{:?}", std::process::id(), std::thread::current().id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("sub/target.md"),
        "# Target page\n\n## Why was it denied: `review`\n\n## Twice\n\n## Twice\n\n```sh\n# not a heading\n```\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("page.md"),
        "# Page\n\n\
         A [good link](sub/target.md), [a good anchor](sub/target.md#why-was-it-denied-review), the\n\
         [second heading of a name](sub/target.md#twice-1) and [this page's](#page).\n\n\
         A [missing file](sub/missing.md) and [a missing anchor](sub/target.md#not-a-heading), and one to a\n\
         heading inside code: [code](sub/target.md#not-a-heading-either).\n\n\
         ```md\n[inside a fence](nowhere.md)\n```\n\n\
         `[inside a code span](nowhere.md)` and [an external one](https://example.com/x.md#y).\n\n\
         [ref]: sub/target.md#target-page\n",
    )
    .unwrap();
    let problems = broken_links(&dir.join("page.md"), &dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].starts_with("page.md:6: sub/missing.md: ") && problems[0].ends_with("does not exist"));
    assert!(problems[1].starts_with("page.md:6: sub/target.md#not-a-heading: "), "{}", problems[1]);
    assert!(problems[2].starts_with("page.md:7: sub/target.md#not-a-heading-either: "), "{}", problems[2]);
}

#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(slug("Why was it denied: `review`"), "why-was-it-denied-review");
    assert_eq!(slug("RBAC: `rollout-operator rbac`"), "rbac-rollout-operator-rbac");
    assert_eq!(slug("Reaction and cost (p99)"), "reaction-and-cost-p99");
    assert_eq!(
        slug("What is happening: Events, stuck groups, `status`, alerts"),
        "what-is-happening-events-stuck-groups-status-alerts"
    );
    assert_eq!(slug("snake_case and A — B"), "snake_case-and-a--b");
    assert_eq!(slug("[Linked](x.md) heading"), "linked-heading");
    let page = "# A\n## A\n### A ###\n```\n# A\n```\n#NoSpace\n";
    assert_eq!(anchors(page), BTreeSet::from(["a".to_string(), "a-1".to_string(), "a-2".to_string()]));
}
