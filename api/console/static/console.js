// Keyboard shortcuts for the review queue and bulk review: j / k move between proposals
// (or groups of them), v verifies the current one (the first when none is selected) with
// its form's choices, r moves to its Reason field (Enter then rejects).
// Progressive enhancement only: every action is an ordinary form without this script.
"use strict";
(function () {
  const proposals = () => Array.from(document.querySelectorAll("article.proposal, article.group"));
  let current = -1;

  function select(index) {
    const list = proposals();
    if (!list.length) return;
    current = Math.max(0, Math.min(index, list.length - 1));
    list.forEach((el, i) => el.classList.toggle("current", i === current));
    list[current].focus();
    list[current].scrollIntoView({ block: "nearest" });
  }

  function typing(target) {
    return target instanceof HTMLElement &&
      (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
  }

  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    const list = proposals();
    if (!list.length) return;
    if (event.key === "j") { select(current + 1); }
    else if (event.key === "k") { select(current < 0 ? 0 : current - 1); }
    else if (event.key === "v" || event.key === "r") {
      // None selected yet: the first proposal, the one the queue shows first.
      if (current < 0) select(0);
      const item = list[current];
      if (event.key === "v") item.querySelector(":scope > .decide form.verify").requestSubmit();
      else item.querySelector(":scope > .decide form.reject input[name=reason]").focus();
    } else { return; }
    event.preventDefault();
  });
})();
