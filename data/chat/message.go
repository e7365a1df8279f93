package chat

// Message is one turn of a conversation. Role is "system", "user", "assistant" or "model"
// ("assistant" is rendered as DiffusionGemma's "model" role word).
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}
