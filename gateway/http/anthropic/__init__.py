"""Anthropic's Messages API at the edge: the request decoded and translated (`request`), answers
(`answer`) and stream events (`events`) in its shapes, its error shape (`errors`), and the
dialect the chat service is given (`dialect`)."""
