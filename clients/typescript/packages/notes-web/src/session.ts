/**
 * Who is signed in: the token kept in `localStorage`, the sign-in form, and sign-in links
 * (`/#token=…`, which the server prints with the development secret).
 *
 * A link never replaces a signed-in user without asking: a link someone sends would otherwise
 * sign the reader in as its sender, and what they type would go to the sender's account. A link
 * for the user already signed in (a fresh token) is taken as it is. With the development secret
 * the server offers its development users (`GET /dev/users`), and the form shows a "Continue
 * as …" button for each.
 */

import { actorOfToken, tokenClaims } from "@engine/client";

import { button, el } from "./dom.js";

const TOKEN_KEY = "engine-notes-token";

export function storedToken(): string | null {
  return localStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string): void {
  localStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken(): void {
  localStorage.removeItem(TOKEN_KEY);
}

/** Call `listener` with the token another tab of this origin stores (a sign-in there). */
export function onTokenStoredElsewhere(listener: (token: string) => void): void {
  addEventListener("storage", (event) => {
    if (event.key === TOKEN_KEY && event.newValue) listener(event.newValue);
  });
}

/** The token of a sign-in link in the address, taken out of the address (and its history entry). */
export function takeLinkToken(): string | undefined {
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  if (token === null) return undefined;
  history.replaceState(history.state, "", location.pathname + location.search);
  return token.trim();
}

/** Why `token` cannot sign anyone in, in words; `undefined` when it may (the server decides). */
export function tokenProblem(token: string, now = Date.now()): string | undefined {
  if (token === "") return "Paste a token first.";
  if (!actorOfToken(token)) return "That is not a sign-in token: a token has three parts separated by dots.";
  const exp = tokenClaims(token)?.exp;
  if (typeof exp === "number" && exp * 1000 <= now) return "That token has expired: get a new one.";
  return undefined;
}

/**
 * Ask `question` in a modal dialog with two answers; resolves to whether `yes` was chosen.
 * `no` has the focus, so Enter keeps things as they are.
 */
export function ask(question: string, yes: string, no: string): Promise<boolean> {
  return new Promise((resolve) => {
    const dialog = el("dialog", { "data-testid": "ask", "aria-labelledby": "ask-question" });
    const answer = (value: boolean) => {
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    const stay = button(no, () => answer(false), { "data-testid": "ask-no" });
    dialog.append(
      el("p", { id: "ask-question" }, question),
      el("div", { class: "actions" }, button(yes, () => answer(true), { "data-testid": "ask-yes", class: "secondary" }), stay),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      answer(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    stay.focus();
  });
}

/** The development users the server offers, or none (a real secret, or offline). */
async function developmentUsers(): Promise<string[]> {
  try {
    const response = await fetch("./dev/users");
    if (!response.ok) return [];
    const users: unknown = await response.json();
    return Array.isArray(users) ? users.filter((user): user is string => typeof user === "string") : [];
  } catch {
    return [];
  }
}

/**
 * The sign-in form: a token field with its error, and a "Continue as …" button per development
 * user. `signIn` gets a token that passed `tokenProblem`.
 */
export function signInForm(heading: string, intro: Node[], signIn: (token: string) => void): HTMLElement {
  const field = el("textarea", { name: "token", rows: "3", id: "token", "aria-describedby": "token-error" });
  const error = el("p", { class: "error", id: "token-error", role: "alert", "data-testid": "sign-in-error" });
  const form = el(
    "form",
    { class: "token-form", "aria-label": "Sign in with a token" },
    el("label", { for: "token" }, "Token"),
    field,
    error,
    el("button", { type: "submit" }, "Sign in"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const token = field.value.trim();
    const problem = tokenProblem(token);
    error.textContent = problem ?? "";
    if (problem) {
      field.setAttribute("aria-invalid", "true");
      field.focus();
      return;
    }
    field.removeAttribute("aria-invalid");
    signIn(token);
  });
  const quick = el("div", { class: "dev-users", "data-testid": "dev-users" });
  quick.hidden = true;
  void developmentUsers().then((users) => {
    quick.replaceChildren(
      el("p", {}, "Development mode: sign in with one click."),
      ...users.map((user) =>
        button(`Continue as ${user}`, () => {
          void fetch(`./dev/token/${encodeURIComponent(user)}`, { method: "POST" })
            .then((response) => (response.ok ? response.text() : Promise.reject(new Error(String(response.status)))))
            .then(signIn, () => {
              error.textContent = `The server gave no token for ${user}: try again.`;
            });
        }),
      ),
    );
    quick.hidden = users.length === 0;
  });
  return el(
    "section",
    { class: "sign-in", "data-testid": "sign-in", "aria-labelledby": "sign-in-heading" },
    el("h2", { id: "sign-in-heading" }, heading),
    ...intro,
    quick,
    form,
  );
}

/** The sign-in page, for nobody signed in; `error` says why the last attempt failed. */
export function signInPage(root: HTMLElement, signIn: (token: string) => void, error?: string): void {
  const form = signInForm("Sign in", [
    el("p", {}, "Paste a token, made with ", el("code", {}, "cargo run -p example-notes -- token --user alice"), "."),
  ], signIn);
  if (error) form.querySelector<HTMLElement>("[data-testid=sign-in-error]")!.textContent = error;
  root.replaceChildren(el("header", {}, el("h1", {}, "Notes")), el("main", { class: "single" }, form));
}
