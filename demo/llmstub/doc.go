// Package llmstub is a deterministic, scripted model behind a real HTTP server that speaks the
// OpenAI Chat Completions wire format, tool calls included. ASK_LLM=stub points the agent's
// OpenAI-compatible adapter at it on loopback, so tests and the demo run the same adapter code as
// production. It is demo and test infrastructure, not something to deploy.
//
// # The API
//
// POST /v1/chat/completions answers with one choice, either a single function tool call
// (finish_reason "tool_calls") or prose (finish_reason "stop"), with deterministic ids and usage.
// With "stream": true it answers as Server-Sent Events: chat.completion.chunk deltas, then a
// usage chunk when stream_options.include_usage is set, then `data: [DONE]`. Requests are
// validated as the real API validates them and rejected with a 400 in OpenAI's error shape
// ({"error": {"message", "type", "param", "code"}}): a body that is not JSON, no model, no or empty
// messages, an unknown role, a tool message whose tool_call_id answers no pending tool call of the
// assistant message before it, an assistant tool call left unanswered, more than 128 tools, a
// function name outside ^[a-zA-Z0-9_-]{1,64}$ (a dot, a space, 65 characters). Any model name is accepted;
// GET /v1/models lists the script's. Options.RequireAuth demands a bearer key (any non-empty key).
// max_completion_tokens (or the older max_tokens) cuts a reply as the real API does: a reply
// longer than the cap, counted as usage counts it, ends where the cap fell — the prose, or the
// tool call's arguments (no longer valid JSON) — with finish_reason "length".
// Every request is recorded (Stub.Requests; GET /_stub/requests for loopback callers) so tests
// can prove what the model was — or was not — asked.
//
// # How a turn is decided
//
// The stub is stateless, like a model: each reply is decided from the request's messages alone.
//
//  1. The latest user message is the question. The script's rules are tried in order; the first
//     whose pattern matches (a case-insensitive regular expression) is used. No match: the
//     script's fallback prose, with no tool call.
//  2. If the rule has from_history, its pattern is matched against the messages of that role
//     before the question, most recent first; the first match's captures become .History. No
//     match: the rule's otherwise prose (it cannot tell what is referred to), with no tool call.
//  3. The assistant tool-call turns after the question say how many steps were taken; their tool
//     results, parsed as JSON, become .Results and .Last.
//  4. If the last tool result is an error, the reply is the rule's on_error prose: an apology. A
//     tool message carries no error flag in this format, so a result counts as an error when it is
//     not JSON, or is a JSON object with a non-null, non-false "error" or a true "is_error" or
//     "isError"; a successful result is the tool's JSON.
//  5. If every step was taken, the reply is the rule's final prose. Otherwise the next step's tool
//     is called with its rendered args — unless the step has if_empty: final and the previous
//     result is empty (null, "", [], {}, or an object whose terms, rows, tables or columns list is
//     empty), in which case the reply is the final prose with .Empty set.
//
// The tool must be offered in the request's tools (exactly, or as the one offered name ending in
// "_"+tool or "-"+tool, for agents that prefix tools with their source); if it is not, or
// tool_choice is "none", the reply says the tool is not available. A step's delay is waited before
// the response is written; a cancelled request ends the wait and nothing is written.
//
// # The script
//
// A script is YAML. The default (default-script.yaml, embedded) answers the README's example
// questions against the demo source; $ASK_STUB_SCRIPT names a file to use instead.
//
//	models: [llm-stub]            # ids for GET /v1/models (default [llm-stub])
//	fallback: "..."               # prose when no rule matches
//	on_error: "..."               # default apology after a failed tool call
//	otherwise: "..."              # default prose when from_history finds nothing
//	rules:
//	  - name: deployments-of-that-team          # unique; recorded in the request log
//	    pattern: '^how many deployments did that team ship in (?P<quarter>\d{4}-Q[1-4])\?$'
//	    from_history:                           # optional
//	      role: assistant                       # assistant or user
//	      pattern: '(?P<team>\w+) had the most incidents'
//	      otherwise: "I can't tell which team you mean."
//	    steps:
//	      - tool: search_catalog
//	        args: {query: deployment}
//	        delay: 3s                           # optional: wait before answering this turn
//	      - tool: run_query
//	        args:
//	          sql: "SELECT COUNT(*) FROM ... WHERE t.name = {{sqlquote .History.team}}"
//	        if_empty: final                     # optional: stop if the previous result is empty
//	    final: "{{.History.team}} shipped {{index .Last.rows 0 0}} deployments."
//	    on_error: "..."                         # optional: this rule's apology
//
// Every string in args and every prose field is a text/template. Args are a YAML mapping whose
// string leaves are rendered and which is sent as the call's JSON arguments (no args: {}). The
// templates see:
//
//	.Match    the question's captures, by group name and by number ("0" is the whole match)
//	.History  the from_history captures, keyed the same way
//	.Results  this ask's tool results so far, by step index, as parsed JSON
//	.Last     the last of .Results (nil before the first)
//	.Empty    true when the final prose was reached through if_empty
//	.Failed   in on_error: .Failed.Tool and .Failed.Message (the error text)
//
// and the functions json, sqlquote (a SQL string literal with quotes doubled), lower and upper.
// Reading a missing key is an error, and a template that fails makes the stub answer 500 with a
// server_error naming the rule: a broken script fails loudly rather than inventing prose. Numbers
// in tool results keep their JSON text, so prose repeats them exactly.
//
// # Logging
//
// The logger gets one line per request with the rule, the decision, the tool name and the token
// counts — never message text, tool arguments or the key.
package llmstub
