// The approval queue's selection: "all on this page", a count, and the buttons off while nothing is picked.
// Without it the page still works: the server answers an empty selection with a message.
(function () {
  "use strict";
  const form = document.getElementById("airlock-queue-form");
  const all = document.getElementById("airlock-select-all");
  if (!form || !all) return;
  const counter = document.getElementById("airlock-selected");
  const picks = Array.from(form.querySelectorAll("input.airlock-pick"));
  const buttons = Array.from(form.querySelectorAll(".airlock-queue-bar button"));

  function update() {
    const chosen = picks.filter((p) => p.checked).length;
    counter.textContent = chosen + " of " + picks.length + " selected";
    buttons.forEach((b) => { b.disabled = chosen === 0; });
    all.checked = chosen > 0 && chosen === picks.length;
    all.indeterminate = chosen > 0 && chosen < picks.length;
  }

  form.addEventListener("change", (event) => {
    if (event.target === all) picks.forEach((p) => { p.checked = all.checked; });
    update();
  });
  update();
})();
