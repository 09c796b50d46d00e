//! A promotion in words: what `promote` prints and the action logs.

use crate::promote::PromotionReport;
use crate::release::channel::DecisionKind;

/// A human summary; `--explain` adds the active windows and the
/// calendar.
pub(crate) fn promotion(r: &PromotionReport) -> String {
    let mut s = String::new();
    let head = match r.decision {
        DecisionKind::Promote if r.explain => format!(
            "would promote {} as {}",
            r.candidate.as_deref().unwrap_or("?"),
            r.tag.as_deref().unwrap_or("?")
        ),
        DecisionKind::Promote if r.promoted => format!(
            "promoted {} as {}",
            r.candidate.as_deref().unwrap_or("?"),
            r.reference.as_deref().unwrap_or("?")
        ),
        DecisionKind::Promote => format!(
            "{} already holds {}",
            r.tag.as_deref().unwrap_or("?"),
            r.candidate.as_deref().unwrap_or("?")
        ),
        DecisionKind::UpToDate => format!(
            "up to date: the channel holds {} (candidate {})",
            r.current.as_deref().unwrap_or("?"),
            r.candidate.as_deref().unwrap_or("?")
        ),
        DecisionKind::Wait if r.unmet => format!(
            "waiting: no candidate newer than the channel meets the requirements (newest {})",
            r.candidate.as_deref().unwrap_or("?")
        ),
        DecisionKind::Wait => format!(
            "waiting: {} is newer, but the gate is shut",
            r.candidate.as_deref().unwrap_or("?")
        ),
        DecisionKind::NoCandidate => "no candidate: no tag of the source prefix exists".to_string(),
    };
    s.push_str(&head);
    s.push('\n');
    if r.forced {
        s.push_str(&format!("BREAK-GLASS: {}\n", r.because));
    } else {
        s.push_str(&format!("because: {}\n", r.because));
    }
    if r.explain {
        s.push_str(&format!("decision: {}\n", r.decision.as_str()));
        s.push_str(&format!(
            "candidate: {}\ncurrent:   {}\n",
            r.candidate.as_deref().unwrap_or("(none)"),
            r.current.as_deref().unwrap_or("(none)")
        ));
        s.push_str(
            "rule: as Flux's numerical policy picks: the highest timestamp; on equal timestamps the \
             alphabetically smallest tag\n",
        );
        if !r.tied.is_empty() {
            s.push_str(&format!(
                "tie: {} share a timestamp; Flux serves {}, so it is the candidate\n",
                r.tied.join(", "),
                r.tied[0]
            ));
        }
        s.push_str(&format!("at: {}\n", r.at));
        s.push_str(&format!(
            "active windows: {}\n",
            if r.gate.active.is_empty() {
                "(none)".to_string()
            } else {
                r.gate.active.join(", ")
            }
        ));
        s.push_str(&format!(
            "next open:  {}\nnext close: {}\n",
            r.next_open.as_deref().unwrap_or(if r.gate.open {
                "(open now)"
            } else {
                "(not within 14 days)"
            }),
            r.next_close.as_deref().unwrap_or("(not within 14 days)")
        ));
        s.push_str("calendar (14 days):\n");
        for p in &r.calendar {
            s.push_str(&format!(
                "  {} .. {}  {}\n",
                p.start,
                p.end,
                if p.open { "open" } else { "shut" }
            ));
        }
    }
    if r.explain && !r.candidates.is_empty() {
        s.push_str("candidates newer than the channel (newest first):\n");
        for c in &r.candidates {
            s.push_str(&format!(
                "  {} {}: {}\n",
                c.tag,
                c.digest,
                if c.eligible {
                    "eligible"
                } else {
                    "not eligible"
                }
            ));
            for l in &c.because {
                s.push_str(&format!("    {l}\n"));
            }
            for i in &c.ignored {
                s.push_str(&format!("    ignored record {}: {}\n", i.record, i.why));
            }
        }
    }
    for e in &r.evidence {
        s.push_str(&format!(
            "evidence: {} ({} {}, {})\n",
            e.record, e.cluster, e.workload, e.state
        ));
    }
    if let Some(r) = &r.record {
        s.push_str(&format!("record {r}\n"));
    }
    s
}
