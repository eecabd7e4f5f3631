// Answers and document passages as Markdown, safely. marked (vendored) renders; raw HTML
// in the text is turned into text before anything parses it as HTML; DOMPurify (vendored)
// then keeps only an allow-list of tags and attributes. Links: http(s) only, new tab,
// rel="noopener noreferrer". Images are never loaded (their alt text is shown). [n]
// markers become buttons that open the cited passage.
"use strict";

const Markdown = (() => {
  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

  const parser = new marked.Marked({
    gfm: true,
    breaks: true,
    renderer: {
      html(token) {
        const text = escapeHtml(token.text || token.raw || "");
        return token.block ? `<p>${text}</p>` : text;
      },
      image(token) {
        return escapeHtml(token.text || token.href || "");
      },
    },
  });

  const TAGS = [
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote",
    "pre", "code", "em", "strong", "del", "a", "table", "thead", "tbody", "tr", "th", "td",
  ];
  const ATTRS = ["href", "title", "align", "start", "class"];
  const purifier = DOMPurify(window);
  purifier.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName !== "A") return;
    const href = node.getAttribute("href") || "";
    if (/^https?:\/\//i.test(href)) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    } else {
      node.removeAttribute("href");
    }
  });

  // [n] in text (not in code or links) → a button carrying its number
  function markRefs(root) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) =>
        node.parentElement && node.parentElement.closest("code, pre, a")
          ? NodeFilter.FILTER_REJECT
          : NodeFilter.FILTER_ACCEPT,
    });
    const texts = [];
    while (walker.nextNode()) if (/\[\d+\]/.test(walker.currentNode.nodeValue)) texts.push(walker.currentNode);
    for (const node of texts) {
      const parts = [];
      let last = 0;
      for (const match of node.nodeValue.matchAll(/\[(\d+)\]/g)) {
        if (match.index > last) parts.push(document.createTextNode(node.nodeValue.slice(last, match.index)));
        const button = document.createElement("button");
        button.type = "button";
        button.className = "ref";
        button.dataset.ref = match[1];
        button.textContent = match[0];
        parts.push(button);
        last = match.index + match[0].length;
      }
      if (last < node.nodeValue.length) parts.push(document.createTextNode(node.nodeValue.slice(last)));
      node.replaceWith(...parts);
    }
  }

  function addCopyButtons(root) {
    for (const pre of root.querySelectorAll("pre")) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "copy";
      button.textContent = t("copy");
      button.addEventListener("click", async () => {
        const code = pre.querySelector("code") || pre;
        try {
          await navigator.clipboard.writeText(code.textContent);
          button.textContent = t("copied");
        } catch {
          getSelection().selectAllChildren(code);
        }
        setTimeout(() => (button.textContent = t("copy")), 1500);
      });
      const frame = document.createElement("div");
      frame.className = "code-frame";
      pre.replaceWith(frame);
      frame.append(button, pre);
    }
  }

  // The text as a fragment of safe nodes (never assigned as HTML to the page).
  function render(text, { refs = true } = {}) {
    const html = parser.parse(String(text || ""));
    const fragment = purifier.sanitize(html, {
      ALLOWED_TAGS: TAGS,
      ALLOWED_ATTR: ATTRS,
      ALLOW_DATA_ATTR: false,
      RETURN_DOM_FRAGMENT: true,
    });
    if (refs) markRefs(fragment);
    addCopyButtons(fragment);
    return fragment;
  }

  return { render };
})();
