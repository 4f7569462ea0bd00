// Paging through an admin list: the API answers `has_more` and `next_after`; a pager keeps the
// cursor of every page it has passed, so "Previous" goes back exactly, and draws its buttons in
// a <nav> under its table.

export class Pager {
  constructor(nav, load) {
    this.nav = nav;
    this.load = load;
    this.cursors = [null];
    this.index = 0;
    this.loaded = false;
    this.previous = this.#button("Previous page", "prev", () => this.#go(-1));
    this.label = document.createElement("span");
    this.label.className = "page-label";
    this.next = this.#button("Next page", "next", () => this.#go(1));
    nav.replaceChildren(this.previous, this.label, this.next);
    nav.hidden = true;
  }

  #button(text, name, onClick) {
    const element = document.createElement("button");
    element.type = "button";
    element.className = `pager-${name}`;
    element.textContent = text;
    element.addEventListener("click", onClick);
    return element;
  }

  // A page that fails to load (its error is shown) leaves the pager where it was.
  async #go(step) {
    const from = this.index;
    this.index = Math.max(0, Math.min(this.cursors.length - 1, this.index + step));
    this.previous.disabled = this.next.disabled = true;
    this.loaded = false;
    await this.load();
    if (!this.loaded) {
      this.index = from;
      this.#render(this.cursors.length > from + 1);
    }
  }

  #render(hasMore) {
    this.previous.disabled = this.index === 0;
    this.next.disabled = !hasMore;
    this.label.textContent = `Page ${this.index + 1}`;
    this.nav.hidden = this.index === 0 && !hasMore;
  }

  // The `after` of the page to load now (null: the first page).
  get after() {
    return this.cursors[this.index];
  }

  // Back to the first page (a filter changed).
  reset() {
    this.cursors = [null];
    this.index = 0;
  }

  // Records what the page just loaded says about the next one; false when the page came back
  // empty past the first (its cursor is gone): the caller loads the first page again.
  update(page) {
    if (this.index > 0 && !page.data.length) {
      this.reset();
      return false;
    }
    this.loaded = true;
    this.cursors.length = this.index + 1;
    const hasMore = Boolean(page.has_more && page.next_after);
    if (hasMore) this.cursors.push(page.next_after);
    this.#render(hasMore);
    return true;
  }
}
