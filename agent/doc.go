// Package agent runs one question to an outcome: it connects to the configured MCP sources as
// the caller, lets a model call their tools, reports every call as a step and a milestone, and
// ends in exactly one of answer, abstention, refusal or error, decided mechanically from what
// the tools did rather than from what the model says.
//
// *Agent implements ask.Runner. Phase 1 (the default) runs one loop in the supervisor branch,
// which the service opens and closes; sources are listed in DAS_SOURCES and their tools
// discovered. Phase 2 (Options.Phase, ASK_PHASE=2) fans out; see Phase 2 below.
//
// # Configuration
//
// Config holds these settings; package config reads them from the environment:
//
//	ASK_LLM              anthropic | openai | stub (default stub), or real: the provider whose
//	                     key is set (an error when neither or both are)
//	ASK_LLM_MODEL        the model name (defaults: anthropic claude-sonnet-4-5, openai gpt-4o-mini, stub stub)
//	ASK_LLM_BASE_URL     the provider's API root; for openai any OpenAI-compatible server
//	                     (Ollama http://127.0.0.1:11434/v1, vLLM, llama.cpp); for stub the
//	                     llm-stub (default http://127.0.0.1:8092/v1)
//	ANTHROPIC_API_KEY    the key for ASK_LLM=anthropic (required)
//	OPENAI_API_KEY       the key for ASK_LLM=openai (required unless ASK_LLM_BASE_URL is set,
//	                     since local servers need none)
//	ASK_LLM_TIMEOUT_S    bound on one attempt of one model call (default 120)
//	ASK_LLM_MAX_RETRIES  retries of a 429/5xx/overloaded model call, each only if it fits in
//	                     the run's deadline, after the provider's Retry-After (one longer
//	                     than 20 s fails the call at once) (default 2; 0 disables)
//	ASK_LLM_MAX_TOKENS   output cap per model call (default 4096)
//	ASK_MAX_TURNS        model calls per run before error{kind: model} (default 12)
//	DAS_SOURCES          MCP sources, name=URL[,name=URL...] (default demo=http://127.0.0.1:8091/mcp)
//	ASK_PHASE            1 (default) or 2: a branch per source, reconciled, and divergence
//	ASK_DIVERGENCE_TURNS phase 2: model calls of the catalog-withheld branch (default 6; 0: none)
//
// # Outcomes
//
// The rule, applied when the model ends its turn without calling a tool:
//
//   - refusal: a source refused a call (its result carried `ask/refusal`). The run ends at the
//     refusal, whatever the model would have said next.
//   - answer (warehouse or multi, path.speed full): at least one statement ran.
//   - answer (catalog, path.speed fast): no statement ran, but at least one catalog
//     definition was retrieved — the answer rests on stated meanings.
//   - abstention: no statement ran, no definition was retrieved and nothing was refused. It
//     carries the catalog terms tried (the arguments of search and define calls), never the
//     question.
//   - error: the model failed or refused (kind model), or the provider cut its reply at the
//     output cap, ASK_LLM_MAX_TOKENS, or at the context window (kind model: a cut reply's prose
//     and tool calls are not used), a source was unreachable, rejected the credentials with
//     HTTP 401/403 or answered 429 (kind transport), or the run used MaxModelCalls model calls
//     without finishing (kind model).
//
// A tool error that is not a refusal (bad SQL, an unknown term) goes back to the model to
// correct and decides nothing by itself; so does a call the model asks for that names no tool or
// whose arguments are not a JSON object, which is not made and so is no step.
//
// Cancel: ctx is checked before every model call and every tool call. A tool call already in
// flight completes (bounded by Options.ToolTimeout; tools are read-only and the source audits
// it), and the run then ends without another model call.
//
// # Answer
//
// The answer's facts come from tool results, never from model text: result is the last
// successful query's columns, rows and truncated flag; sql is every statement that ran
// successfully, in order; provenance is every definition retrieved (term, the definition as
// statement, the definition's own source, kind); caveats are those definitions' caveats;
// path.detail is catalog (no statement ran), warehouse (statements ran on one source) or multi
// (on more than one); headline is present only when the result is one row of one column; text
// is the model's final prose, with any restatement of a question (this ask's or an earlier
// turn's) replaced by "[the question]"; divergence is null in phase 1.
//
// # Phase 2
//
// One `source` branch per configured source (b2, b3, … in DAS_SOURCES order, parent b1), each a
// sub-agent — this same loop — with that source's tools only, all concurrent; beside them, when
// DivergenceTurns > 0 and some source offers a catalog tool, one `withheld` branch answering the
// question with every tool but the catalog's and no mention of it. Steps and milestones carry
// their branch's id. Outcomes combine mechanically: a refusal in any branch is the run's refusal
// (and stops the other branches); else an error in a source branch is the run's error; else the
// supervisor emits a reconciling milestone and runs the loop once more with every tool, the
// branches' calls and results given to the model as its own (branches that ran no statement
// first, then those whose last statement ran without a definition in hand, then those whose
// last statement ran with one: never in an order the configuration decides, since the result is
// the last statement), and the outcome is decided from
// every branch's facts and its own as in phase 1. An answer's divergence is the withheld branch's
// answer when both have a result and their rows differ (see divergence); the withheld branch
// failing or abstaining leaves it null and never fails the ask, and nor does its being slow: the
// supervisor reconciles without waiting for it, and it is stopped shortly before the run's
// deadline. A panic in a branch ends that branch in error{internal}. docs/decisions.md has the
// reasons.
//
// # Milestones
//
// One milestone per tool call, emitted when the call starts, before the step that reports it
// (what a person can be told now). The phase is the tool's declared `ask/phase` (see
// source.Classify for the fallback by role and name), except that a query on a second source is
// reconciling. The subject comes from the call's arguments, in the catalog's vocabulary: the
// term searched or defined, the table described, "tables" for a listing, the tables a statement
// reads; one that holds a question is never emitted (the kind of thing stands instead).
//
// # Privacy
//
// The question text is sent to the model and nowhere else: no log line, step, milestone,
// abstention or error message carries it. The caller's token goes only to the sources.
package agent
