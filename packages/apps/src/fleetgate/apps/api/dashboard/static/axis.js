// fleetgate timelines: show only the axis labels that fit the axis's width as drawn.
// The server places each label at a percentage of the axis and cannot know its width in
// pixels, so on a narrow timeline (or with a midnight's date label pinned to an edge) two
// labels can meet. After every render and resize this hides, left to right, each label that
// would touch one already shown: the dates of midnights first, then the hours between them.
"use strict";

(function () {
  const GAP_PX = 4;

  function thin(axis) {
    const labels = [...axis.querySelectorAll("text")];
    for (const label of labels) label.style.visibility = "";
    const shown = [];
    const fits = (box) =>
      shown.every((s) => box.left >= s.right + GAP_PX || box.right + GAP_PX <= s.left);
    for (const major of [true, false]) {
      for (const label of labels) {
        if (label.classList.contains("major") !== major) continue;
        const box = label.getBoundingClientRect();
        if (fits(box)) shown.push(box);
        else label.style.visibility = "hidden";
      }
    }
  }

  function thinAll() {
    for (const axis of document.querySelectorAll("svg.tl-axis")) thin(axis);
  }

  document.addEventListener("DOMContentLoaded", () => {
    thinAll();
    // The dashboard's refresh and the What-if page's results replace the timelines; the
    // observer runs before anything else can read or paint the page.
    new MutationObserver(thinAll).observe(document.body, { childList: true, subtree: true });
  });
  window.addEventListener("resize", thinAll);
})();
