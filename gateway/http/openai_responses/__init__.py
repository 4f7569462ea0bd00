"""OpenAI's Responses API in front of the chat service: its request translation, answers,
events and dialect."""
