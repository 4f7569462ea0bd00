"""The chat request path: validate, resolve, admit, call the upstream (falling back), settle;
the outcome for the edge to render, whichever client dialect asked (`service`, `streaming`)."""
