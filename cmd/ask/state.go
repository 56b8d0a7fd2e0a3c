package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// stateFile remembers the last conversation per service URL and identity, for --continue. It
// holds conversation ids only: never a question, an answer or a token.
type stateFile struct{ path string }

type stateEntry struct {
	ConversationID string    `json:"conversation_id"`
	Updated        time.Time `json:"updated"`
}

// newStateFile places the file under dir/ask: dir is $XDG_STATE_HOME, or ~/.local/state
// (config.Client.StateDir).
func newStateFile(dir string) (stateFile, error) {
	if dir == "" {
		return stateFile{}, errors.New("neither XDG_STATE_HOME nor HOME is set")
	}
	return stateFile{path: filepath.Join(dir, "ask", "conversations.json")}, nil
}

func stateKey(url, oid string) string { return url + " " + oid }

func (s stateFile) load() (map[string]stateEntry, error) {
	m := map[string]stateEntry{}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]stateEntry{}, nil // a damaged file only loses the last conversation
	}
	return m, nil
}

// last returns the conversation last used for key, or "".
func (s stateFile) last(key string) (string, error) {
	m, err := s.load()
	if err != nil {
		return "", err
	}
	return m[key].ConversationID, nil
}

// remember records conv as the last conversation for key, replacing the file atomically.
func (s stateFile) remember(key, conv string) error {
	m, err := s.load()
	if err != nil {
		return err
	}
	m[key] = stateEntry{ConversationID: conv, Updated: time.Now().UTC()}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".conversations-*.json")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(tmp.Name())
		return errors.Join(werr, cerr)
	}
	return os.Rename(tmp.Name(), s.path)
}
