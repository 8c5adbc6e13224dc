/** Small DOM helpers of the notes web app: elements with attributes, and keyed children. */

/** An element with attributes and children. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

/** A button that calls `action` when clicked. */
export function button(label: string, action: () => void, attributes: Record<string, string> = {}): HTMLButtonElement {
  const element = el("button", { type: "button", ...attributes }, label);
  element.addEventListener("click", action);
  return element;
}

/** Set `text` as `element`'s text, touching the DOM only when it differs. */
export function setText(element: HTMLElement, text: string): void {
  if (element.textContent !== text) element.textContent = text;
}

/** Set or remove attribute `name`, touching the DOM only when it changes. */
export function setAttribute(element: Element, name: string, value: string | null): void {
  if (element.getAttribute(name) === value) return;
  if (value === null) element.removeAttribute(name);
  else element.setAttribute(name, value);
}

/**
 * The children of `parent`, one node per key: a node is made once and updated in place, so a
 * render never takes away the element the user is pointing at or typing in. For short lists
 * (lists, members, refused writes); the notes have their own incremental list.
 */
export class Keyed<T> {
  private readonly nodes = new Map<string, HTMLElement>();

  constructor(
    private readonly parent: HTMLElement,
    private readonly make: (item: T, key: string) => HTMLElement,
    private readonly update: (node: HTMLElement, item: T) => void = () => undefined,
  ) {}

  show(items: [key: string, item: T][]): void {
    const next = items.map(([key, item]) => {
      let node = this.nodes.get(key);
      if (!node) {
        node = this.make(item, key);
        this.nodes.set(key, node);
      }
      this.update(node, item);
      return node;
    });
    const kept = new Set(next);
    for (const [key, node] of this.nodes) if (!kept.has(node)) this.nodes.delete(key);
    const now = [...this.parent.children];
    if (now.length !== next.length || now.some((node, i) => node !== next[i])) this.parent.replaceChildren(...next);
  }
}
