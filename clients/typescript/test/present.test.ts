// The presentation helpers on phase-2 events: the divergence sentence, and branches collapsed
// until expanded (no service needed).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Branches, describeOutcome, divergenceWords, milestoneWords, type AnswerEvent, type BranchEvent, type MilestoneEvent } from "../src/index.js";

const envelope = { ticket: "t_1", conversation_id: "c_1", ts: "2026-12-01T00:00:00Z" };

describe("phase-2 presentation", () => {
  test("the divergence sentence", () => {
    const answer: AnswerEvent = {
      ...envelope, seq: 9, type: "answer", text: "Mobile had the highest change failure rate in 2026-Q3: 14%.",
      caveats: [], provenance: [{ term: "change failure rate", statement: "(failed + rolled_back) / all", source: "Handbook", kind: "glossary_term" }],
      path: { speed: "full", detail: "multi" }, sql: ["SELECT …"],
      result: { columns: ["team", "change_failure_rate_pct"], rows: [["Mobile", 14]], truncated: false },
      divergence: {
        result: { columns: ["team", "failure_rate_pct"], rows: [["Data", 11.1]], truncated: false },
        sql: ["SELECT …"], without: ["change failure rate"],
      },
    };
    const want = "Without the catalog's definition of change failure rate, the answer would have been team Data, failure_rate_pct 11.1.";
    assert.equal(divergenceWords(answer.divergence!), want);
    assert.ok(describeOutcome(answer).includes(want), describeOutcome(answer));
    assert.ok(!describeOutcome({ ...answer, divergence: null }).includes("Without the catalog"));
  });

  test("an answer's rows are shown, and said to be capped when the source capped them", () => {
    const answer: AnswerEvent = {
      ...envelope, seq: 9, type: "answer", text: "Per team.", caveats: [], provenance: [],
      path: { speed: "full", detail: "warehouse" }, sql: ["SELECT …"], divergence: null,
      result: { columns: ["team", "n"], rows: [["Data", 1], ["Mobile", 2]], truncated: true },
    };
    const said = describeOutcome(answer);
    assert.ok(said.includes("  Mobile | 2"), said);
    assert.ok(said.includes("the source capped these rows: there are more"), said);
    assert.ok(!describeOutcome({ ...answer, result: { ...answer.result!, truncated: false } }).includes("capped"));
  });

  test("a milestone whose subject is a placeholder is said without it", () => {
    // The service's subjects when it can name no term or table (the contract's MilestoneBody.subject).
    const m = (phase: MilestoneEvent["phase"], subject: string): MilestoneEvent => ({ ...envelope, seq: 3, type: "milestone", phase, subject, source: "demo" });
    assert.equal(milestoneWords(m("grounding", "catalog")), "Looking in the catalog");
    assert.equal(milestoneWords(m("grounding", "incident")), 'Checking what "incident" means in the catalog');
    assert.equal(milestoneWords(m("discovering", "tables")), "Seeing which tables there are");
    // docs/clients.md's words, and the page's: it said "Reading how incidents is laid out".
    assert.equal(milestoneWords(m("discovering", "incidents")), "Reading how the incidents table is laid out");
    assert.equal(milestoneWords(m("querying", "query")), "Querying the demo data");
    assert.equal(milestoneWords(m("querying", "incidents")), "Querying incidents");
  });

  test("the supervisor's reconciling milestone says what was combined", () => {
    // The subject is the terms or tables reconciled, else "sources": that read "Combining sources across sources".
    const m = (subject: string): MilestoneEvent => ({ ...envelope, seq: 12, type: "milestone", phase: "reconciling", subject, source: "catalog,warehouse", branch_id: "b1" });
    assert.equal(milestoneWords(m("sources")), "Combining what the sources found");
    assert.equal(milestoneWords(m("change failure rate")), "Combining what the sources found on change failure rate");
  });

  test("branches are collapsed: one line each, the supervisor's milestones shown", () => {
    const b = new Branches();
    const open = (branch_id: string, role: string, source?: string): BranchEvent =>
      ({ ...envelope, seq: 2, type: "branch", branch_id, role, state: "open", ...(source ? { source } : {}) });
    assert.equal(b.add(open("b1", "supervisor")), undefined);
    assert.equal(b.add(open("b2", "source", "catalog")), "Asking catalog");
    assert.equal(b.add(open("b4", "withheld")), "Also answering without the catalog, to compare");
    const m = (branch_id?: string): MilestoneEvent =>
      ({ ...envelope, seq: 5, type: "milestone", phase: "grounding", subject: "change failure rate", source: "catalog", ...(branch_id ? { branch_id } : {}) });
    assert.equal(b.collapsed(m("b2")), true);
    assert.equal(b.of(m("b2")), "catalog");
    assert.equal(b.collapsed(m("b1")), false, "the supervisor's milestone is shown");
    assert.equal(b.collapsed(m()), false, "a phase-1 milestone names no branch and is shown");
  });
});
