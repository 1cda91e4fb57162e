//! The parts of the project's documents its tests hold the code to: a section between
//! `<!-- marker:begin … -->` and `<!-- marker:end -->`, and the code block inside one.

/// The text between `<!-- {marker}:begin` (and whatever the begin comment says after it) and
/// `<!-- {marker}:end -->` in `text`; panics, naming the marker, when there is none (a test's
/// setup failing).
#[allow(clippy::panic)]
pub fn marked_section<'a>(text: &'a str, marker: &str) -> &'a str {
    text.split(&format!("<!-- {marker}:begin"))
        .nth(1)
        .and_then(|rest| rest.split(&format!("<!-- {marker}:end -->")).next())
        .unwrap_or_else(|| panic!("no <!-- {marker}:begin --> … <!-- {marker}:end --> section"))
}

/// The code of the first fenced block in `section` whose fence is `fence` (` ```rust `), to
/// its closing fence, newlines as they are; panics when there is none.
#[allow(clippy::panic)]
pub fn fenced_code<'a>(section: &'a str, fence: &str) -> &'a str {
    section
        .split(&format!("{fence}\n"))
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("no {fence} block in the section"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_section_and_its_code_block_are_found() {
        let doc =
            "intro\n<!-- x:begin (a note) -->\ntext\n```rust\nfn a() {}\n```\n<!-- x:end -->\n";
        let section = marked_section(doc, "x");
        assert!(section.contains("text"));
        assert_eq!(fenced_code(section, "```rust"), "fn a() {}\n");
    }
}
