// How a client in this language presents what the service sends: each outcome kind handled by
// its own type (the switch is exhaustive, so a new outcome in the contract fails to compile here),
// and milestones in this client's own words.

import type { BranchEvent, Divergence, MilestoneEvent, Outcome } from "./client.js";

/** describeOutcome renders a terminal event for a person, saying what kind of outcome it is. */
export function describeOutcome(o: Outcome): string {
  switch (o.type) {
    case "answer": {
      const lines: string[] = [];
      if (o.headline) lines.push(`${String(o.headline.value)} (${o.headline.label})`);
      lines.push(o.text);
      // The rows, unless the headline is the whole of them, and whether the source capped them
      // (else they read as the whole answer), as the Python client and the page.
      const rows = o.result?.rows ?? [];
      if (o.result && rows.length > 0 && !(o.headline && rows.length === 1)) {
        lines.push(`  ${o.result.columns.join(" | ")}`);
        for (const row of rows) lines.push(`  ${row.map((v) => String(v)).join(" | ")}`);
      }
      if (o.result?.truncated) lines.push("  (the source capped these rows: there are more)");
      for (const c of o.caveats) lines.push(`Keep in mind — ${c.term}: ${c.text} (${c.source})`);
      for (const p of o.provenance) lines.push(`Rests on — ${p.term}: ${p.statement} (${p.source})`);
      if (o.divergence) lines.push(divergenceWords(o.divergence));
      lines.push(o.path.speed === "fast" ? "Answered from the catalog alone." : `Answered by querying the data (${o.sql.length} quer${o.sql.length === 1 ? "y" : "ies"}).`);
      return lines.join("\n");
    }
    case "abstention": {
      // Say exactly what was tried: no claim of a lookup that never happened.
      const sources = o.sources ?? [];
      const lines: string[] = [];
      if (sources.length === 0 && o.terms.length === 0) lines.push("No answer: nothing was looked up (the agent called no tool).");
      else if (o.terms.length === 0) lines.push(`No answer: nothing found in ${sources.join(", ")} answers this.`);
      else lines.push(`No answer: the catalog has nothing to answer this from. Looked for: ${o.terms.join(", ")}.`);
      // The model's own words, such as a clarifying question the person can answer in the same conversation.
      if (o.text) lines.push(`The agent said: ${o.text}`);
      return lines.join("\n");
    }
    case "refusal":
      return `Refused: the ${o.source} source refused ${o.tool} for you (${o.reason}). This is recorded in its audit log; it is not an empty result.`;
    case "error":
      return o.kind === "cancelled" ? "Cancelled." : `Not answered (${o.kind}): ${o.message}`;
    default: {
      const unhandled: never = o;
      return unhandled;
    }
  }
}

/** milestoneWords says what a milestone means, in this client's words. */
export function milestoneWords(m: MilestoneEvent): string {
  switch (m.phase) {
    // "catalog" and "query" are the service's placeholders when it can name no term or table
    // (MilestoneBody.subject): they read 'Checking what "catalog" means' and "Querying query".
    case "grounding":
      return m.subject === "" || m.subject === "catalog" ? "Looking in the catalog" : `Checking what "${m.subject}" means in the catalog`;
    case "discovering":
      return m.subject === "tables" ? "Seeing which tables there are" : `Reading how the ${m.subject} table is laid out`;
    case "querying":
      return m.subject === "" || m.subject === "query" ? `Querying the ${m.source} data` : `Querying ${m.subject}`;
    case "reconciling":
      // The subject is the terms or tables reconciled, or "sources" when there are none (the
      // source field names the sources): "Combining sources across sources" said nothing.
      return m.subject === "" || m.subject === "sources" ? "Combining what the sources found" : `Combining what the sources found on ${m.subject}`;
    default: {
      const unknown: never = m.phase;
      return `Working on ${String(unknown)}`;
    }
  }
}

/**
 * divergenceWords says what the answer would have been without the catalog's definitions
 * (answer.divergence, phase 2): "Without the catalog's definition of …, the answer would have
 * been …".
 */
export function divergenceWords(d: Divergence): string {
  const defs = d.without.length > 1 ? "definitions" : "definition";
  let what = "a different result";
  if (d.headline) {
    what = `${String(d.headline.value)} (${d.headline.label})`;
  } else if (d.result.rows.length === 1) {
    const row = d.result.rows[0] ?? [];
    what = d.result.columns.map((c, i) => `${c} ${String(row[i])}`).join(", ");
  } else if (d.result.rows.length > 1) {
    what = `${d.result.rows.length} rows of ${d.result.columns.join(", ")}`;
  }
  return `Without the catalog's ${defs} of ${d.without.join(", ")}, the answer would have been ${what}.`;
}

/**
 * Branches follows a run's branches so that a client can show them collapsed, as the contract
 * asks of a client that renders: one line when each branch opens, and only the supervisor's
 * milestones (phase 1 names no branch, so everything is the supervisor's). A client that lets a
 * person expand a branch shows the milestones whose `of` is that branch's label.
 */
export class Branches {
  private readonly labels = new Map<string, string>();

  /** add records a branch event; for a branch below the supervisor's opening, the line that stands for it. */
  add(b: BranchEvent): string | undefined {
    if (b.role === "supervisor" || b.state !== "open") return undefined;
    if (b.role === "withheld") {
      this.labels.set(b.branch_id, "without the catalog");
      return "Also answering without the catalog, to compare";
    }
    const label = b.source ?? b.branch_id;
    this.labels.set(b.branch_id, label);
    return `Asking ${label}`;
  }

  /** of is the label of the branch a step or milestone was made in, or undefined for the supervisor's work. */
  of(e: { branch_id?: string }): string | undefined {
    return e.branch_id === undefined ? undefined : this.labels.get(e.branch_id);
  }

  /** collapsed reports whether a milestone belongs to a branch, so is hidden until the branch is expanded. */
  collapsed(m: MilestoneEvent): boolean {
    return this.of(m) !== undefined;
  }
}
