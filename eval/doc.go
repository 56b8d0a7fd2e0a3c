// Package eval scores an implementation of the ask service, and the model behind it, on a
// question set: it asks every question through the published API (package client over the
// generated client), as the identity the set names, and judges each outcome against the set —
// the outcome kind, the answer's rows against the expected result computed by SQL when the eval
// runs, the provenance and caveats the answer must carry — and measures latency and usage.
//
// The conformance suite proves the contract; this package measures judgement and latency. A
// set's scores against the llm-stub are what the stub's script does (off-script questions
// abstain); that is correct, and the set is never matched by stub rules.
//
// [Run] asks; [Score] summarises; [Report] is what `make eval` writes (Markdown, JSON and a
// chart, see [WriteChart]); [Diff] compares two reports. docs/eval.md is the user's guide.
package eval
