package llmstub

import (
	"encoding/json"
	"net/http"
)

// apiError is an error in OpenAI's shape:
//
//	{"error": {"message": "...", "type": "invalid_request_error", "param": "messages", "code": null}}
//
// Messages follow the real API's wording where the stub mirrors one of its checks, so an adapter's
// error handling sees what it would see in production. A message never quotes the question.
type apiError struct {
	status  int
	message string
	typ     string
	param   string // "" is null
	code    string // "" is null
}

func (e *apiError) Error() string { return e.message }

func invalidRequest(param, code, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, message: message, typ: "invalid_request_error", param: param, code: code}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// writeAPIError writes e with its status.
func writeAPIError(w http.ResponseWriter, e *apiError) {
	body := struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}{}
	body.Error.Message = e.message
	body.Error.Type = e.typ
	body.Error.Param = nullable(e.param)
	body.Error.Code = nullable(e.code)
	writeJSON(w, e.status, body)
}

// writeJSON writes v as the response body. An encoding failure can only come from a broken
// connection, which the client has already seen, so it is not reported further.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
